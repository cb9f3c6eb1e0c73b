#pragma once

// boost::container::small_vector, included through here so that GCC 12's -Wstringop-overread stays quiet about it:
// where a small_vector is copied or moved after inlining, GCC cannot bound the element count and warns that the
// memcpy of the inline elements may read past them (a false positive: the count never exceeds the capacity in use).
// The pragma covers the boost code's location, so every use of the type is covered wherever it is instantiated.
#pragma GCC diagnostic push
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wstringop-overread"
#endif
#include <boost/container/small_vector.hpp>
#pragma GCC diagnostic pop
