#include "repository/checksums.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace weft {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kSha256sum[] = "/usr/bin/sha256sum";
constexpr char kEmptyHex[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr char kAbcHex[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
// Any 64 hex digits, for manifests that are only parsed.
const std::string kA(64, 'a');
const std::string kB(64, 'b');

Sha256Digest Digest(std::string_view hex) {
  Sha256Digest d{};
  for (size_t i = 0; i < d.size(); ++i)
    d[i] = static_cast<uint8_t>(std::stoi(std::string(hex.substr(2 * i, 2)), nullptr, 16));
  return d;
}

struct Entry {
  std::string path;
  std::string hex;
  bool operator==(const Entry&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Entry& e) { return os << "{\"" << e.path << "\", " << e.hex << "}"; }

std::vector<Entry> Entries(const std::vector<ChecksumEntry>& parsed) {
  std::vector<Entry> out;
  for (const ChecksumEntry& e : parsed) out.push_back({e.path, ToHex(e.digest)});
  return out;
}

TEST(ToHexTest, LowercaseTwoDigitsPerByte) {
  Sha256Digest d{};
  d[0] = 0x0f;
  d[1] = 0xA0;
  d[31] = 0xff;
  EXPECT_EQ(ToHex(d), "0fa0" + std::string(58, '0') + "ff");
  EXPECT_EQ(ToHex(Digest(kAbcHex)), kAbcHex);
}

TEST(ParseChecksumManifestTest, Accepts) {
  const std::string upper = "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD";
  struct Case {
    const char* what;
    std::string text;
    std::vector<Entry> want;
  };
  const Case cases[] = {
      {"empty text", "", {}},
      {"only blank lines", "\n\n\r\n", {}},
      {"text mode", kA + "  model.pt\n", {{"model.pt", kA}}},
      {"binary mode", kA + " *model.pt\n", {{"model.pt", kA}}},
      {"no final newline", kA + "  a\n" + kB + "  b", {{"a", kA}, {"b", kB}}},
      {"blank lines between", "\n" + kA + "  a\n\n\n" + kB + "  b\n\n", {{"a", kA}, {"b", kB}}},
      {"CRLF line endings", kA + "  a\r\n" + kB + " *b\r\n", {{"a", kA}, {"b", kB}}},
      {"uppercase hex", upper + "  x", {{"x", kAbcHex}}},
      {"mixed case hex", "Ba7816bF8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015aD  x", {{"x", kAbcHex}}},
      {"a space in the name", kA + "  with space.bin", {{"with space.bin", kA}}},
      {"a name starting with a space", kA + "   lead", {{" lead", kA}}},
      {"a name ending with a space", kA + "  trail ", {{"trail ", kA}}},
      {"a name starting with '*', text mode", kA + "  *star", {{"*star", kA}}},
      {"a name starting with '*', binary mode", kA + " **star", {{"*star", kA}}},
      {"a subdirectory", kA + "  sub/weights.bin", {{"sub/weights.bin", kA}}},
      {"'.' components dropped (find . | xargs sha256sum)", kA + "  ./sub/./x", {{"sub/x", kA}}},
      {"a file named like a component", kA + "  ...", {{"...", kA}}},
      {"escaped backslash", "\\" + kA + "  a\\\\b", {{"a\\b", kA}}},
      {"escaped newline", "\\" + kA + "  n\\nl", {{"n\nl", kA}}},
      {"escaped carriage return (coreutils >= 9.0)", "\\" + kA + " *c\\rr", {{"c\rr", kA}}},
      {"an unescaped line reads a backslash as it is", kA + "  a\\nb", {{"a\\nb", kA}}},
      {"BSD tag", "SHA256 (model.pt) = " + kA, {{"model.pt", kA}}},
      {"BSD tag, uppercase hex", "SHA256 (x) = " + upper, {{"x", kAbcHex}}},
      {"BSD tag, escaped", "\\SHA256 (a\\\\b\\nc) = " + kA, {{"a\\b\nc", kA}}},
      {"BSD tag, a name holding ') = '", "SHA256 (a) = b) = " + kA, {{"a) = b", kA}}},
      {"BSD tag and GNU lines mixed", "SHA256 (a) = " + kA + "\n" + kB + "  b", {{"a", kA}, {"b", kB}}},
      {"the manifest's own entry skipped", kA + "  SHA256SUMS\n" + kB + "  b", {{"b", kB}}},
      {"the manifest's own entry skipped, as ./SHA256SUMS", kA + "  ./SHA256SUMS\n" + kB + "  b", {{"b", kB}}},
      {"a manifest in a subdirectory is a file like any", kA + "  sub/SHA256SUMS", {{"sub/SHA256SUMS", kA}}},
      {"the same entry twice, kept once", kA + "  a\n" + kA + " *./a", {{"a", kA}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Result<std::vector<ChecksumEntry>> parsed = ParseChecksumManifest(c.text);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(Entries(*parsed), c.want);
  }
}

TEST(ParseChecksumManifestTest, Rejects) {
  struct Case {
    const char* what;
    std::string text;
    std::string want;  // the message starts with it
  };
  const std::string malformed = "malformed line: expected \"<64 hex digits>  <name>\"";
  const std::string bsd_malformed = "malformed line: expected \"SHA256 (<name>) = <64 hex digits>\"";
  const Case cases[] = {
      {"not a checksum line", "hello", "SHA256SUMS:1: " + malformed},
      {"the line number counts blank lines", kA + "  a\n\n\nhello\n", "SHA256SUMS:4: " + malformed},
      {"one space (BSD -r form)", kA + " x", "SHA256SUMS:1: " + malformed},
      {"a tab as separator", kA + "\t x", "SHA256SUMS:1: " + malformed},
      {"a leading blank", " " + kA + "  x", "SHA256SUMS:1: " + malformed},
      {"a comment", "# made by hand", "SHA256SUMS:1: " + malformed},
      {"a digest alone", kA, "SHA256SUMS:1: " + malformed},
      {"a non-hex digit", std::string(63, 'a') + "g  x", "SHA256SUMS:1: " + malformed},
      {"65 hex digits", kA + "a  x", "SHA256SUMS:1: a digest of 65 hex digits; SHA-256 has 64"},
      {"a SHA-1 manifest", std::string(40, 'a') + "  x", "SHA256SUMS:1: a digest of 40 hex digits; SHA-256 has 64"},
      {"BSD tag without the digest", "SHA256 (x) = ", "SHA256SUMS:1: " + bsd_malformed},
      {"BSD tag with a short digest", "SHA256 (x) = " + std::string(63, 'a'), "SHA256SUMS:1: " + bsd_malformed},
      {"BSD tag with a long digest", "SHA256 (x) = " + kA + "a", "SHA256SUMS:1: " + bsd_malformed},
      {"BSD tag with a non-hex digest", "SHA256 (x) = " + std::string(63, 'a') + "z", "SHA256SUMS:1: " + bsd_malformed},
      {"BSD tag without ') = '", "SHA256 (x)=" + kA, "SHA256SUMS:1: " + bsd_malformed},
      {"OpenSSL's form", "SHA256(x)= " + kA, "SHA256SUMS:1: " + malformed},
      {"another algorithm's tag", "SHA512 (x) = " + kA, "SHA256SUMS:1: " + malformed},
      {"an empty name", kA + "  ", "SHA256SUMS:1: empty name"},
      {"an empty name, BSD tag", "SHA256 () = " + kA, "SHA256SUMS:1: empty name"},
      {"an absolute path", kA + "  /etc/passwd", "SHA256SUMS:1: absolute path \"/etc/passwd\""},
      {"an absolute path, BSD tag", "SHA256 (/x) = " + kA, "SHA256SUMS:1: absolute path \"/x\""},
      {"'..'", kA + "  ..", "SHA256SUMS:1: path \"..\" has a \"..\" component"},
      {"'..' first", kA + "  ../x", "SHA256SUMS:1: path \"../x\" has a \"..\" component"},
      {"'..' inside", kA + "  a/../../x", "SHA256SUMS:1: path \"a/../../x\" has a \"..\" component"},
      {"'..' escaped", "\\" + kA + "  a\\\\/../x", "SHA256SUMS:1: path \"a\\\\/../x\" has a \"..\" component"},
      {"an empty component", kA + "  a//b", "SHA256SUMS:1: path \"a//b\" has an empty component"},
      {"a trailing slash", kA + "  sub/", "SHA256SUMS:1: path \"sub/\" has an empty component"},
      {"'.'", kA + "  .", "SHA256SUMS:1: path \".\" names the directory itself"},
      {"'./.'", kA + "  ./.", "SHA256SUMS:1: path \"./.\" names the directory itself"},
      {"a NUL byte", kA + "  a" + std::string(1, '\0') + "b", "SHA256SUMS:1: the name contains a NUL byte"},
      {"a NUL byte, escaped line", "\\" + kA + "  a" + std::string(1, '\0'), "SHA256SUMS:1: the name contains a NUL"},
      {"an unknown escape", "\\" + kA + "  a\\tb",
       "SHA256SUMS:1: invalid escape \"\\t\" in the name (sha256sum writes only \\\\, \\n and \\r)"},
      {"a lone backslash at the end", "\\" + kA + "  ab\\", "SHA256SUMS:1: the name ends in a lone backslash"},
      {"a bad escape, BSD tag", "\\SHA256 (a\\x) = " + kA, "SHA256SUMS:1: invalid escape \"\\x\""},
      {"one path, two digests", kA + "  a\n" + kB + "  a",
       "SHA256SUMS:2: \"a\" is listed again with a different digest (first on line 1)"},
      {"one path, two digests, spelled differently", kA + "  sub/a\n\n" + kB + " *./sub/./a",
       "SHA256SUMS:3: \"sub/a\" is listed again with a different digest (first on line 1)"},
      {"control bytes in a name are escaped in the message", "\\" + kA + "  /etc/\\npass\x1b",
       "SHA256SUMS:1: absolute path \"/etc/\\npass\\x1b\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Result<std::vector<ChecksumEntry>> parsed = ParseChecksumManifest(c.text);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), StartsWith(c.want));
  }
}

TEST(ParseChecksumManifestTest, LongNamesAreCutInMessages) {
  Result<std::vector<ChecksumEntry>> parsed = ParseChecksumManifest(kA + "  /" + std::string(100000, 'x'));
  ASSERT_FALSE(parsed.ok());
  EXPECT_LT(parsed.status().message().size(), 400u);
  EXPECT_THAT(parsed.status().message(), HasSubstr("more bytes)"));
}

TEST(ParseChecksumManifestTest, SizeLimit) {
  // Blank lines only: the size alone decides.
  EXPECT_TRUE(ParseChecksumManifest(std::string(kMaxChecksumManifestBytes, '\n')).ok());
  Result<std::vector<ChecksumEntry>> parsed = ParseChecksumManifest(std::string(kMaxChecksumManifestBytes + 1, '\n'));
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(), "SHA256SUMS: larger than 1048576 bytes, the limit for a manifest");
}

TEST(ParseChecksumManifestTest, EntryLimit) {
  const std::string two = kA + "  a\n" + kA + "  b\n";
  const ChecksumManifestLimits limits{.max_entries = 2};
  ASSERT_TRUE(ParseChecksumManifest(two, limits).ok());
  // Skipped lines (the manifest itself, repeats) do not count.
  EXPECT_TRUE(ParseChecksumManifest(two + kA + "  SHA256SUMS\n" + kA + "  a\n", limits).ok());
  Result<std::vector<ChecksumEntry>> parsed = ParseChecksumManifest(two + "\n" + kA + "  c\n", limits);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "SHA256SUMS:4: more than 2 entries");
  // The default limit is out of reach of the byte limit: the shortest entry line is 68 bytes.
  EXPECT_GT(kMaxChecksumEntries * 68, kMaxChecksumManifestBytes);
}

// A fresh directory under the test's temp dir, removed afterwards.
class ChecksumFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::path(::testing::TempDir()) / "checksums_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << pattern;
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }

  fs::path Write(const fs::path& relative, std::string_view contents) {
    const fs::path path = dir_ / relative;
    fs::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    EXPECT_TRUE(out.good()) << path;
    return path;
  }

  // Runs `command` in dir_ with sh; fails the test when it does not exit 0.
  void Shell(const std::string& command) {
    const std::string full = "cd '" + dir_.string() + "' && " + command;
    ASSERT_EQ(std::system(full.c_str()), 0) << full;
  }

  std::string Read(const fs::path& relative) {
    std::ifstream in(dir_ / relative, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  static bool HaveSha256sum() { return ::access(kSha256sum, X_OK) == 0; }

  // sha256sum's digest of `file`, read through a pipe.
  static std::string Sha256sumOf(const fs::path& file) {
    const std::string command = std::string(kSha256sum) + " < '" + file.string() + "'";
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) return "popen failed";
    char hex[65] = {};
    const size_t n = std::fread(hex, 1, 64, pipe);
    ::pclose(pipe);
    return std::string(hex, n);
  }

  void ExpectVerified() {
    Result<ManifestResult> result = VerifyChecksumManifest(dir_);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    EXPECT_EQ(*result, ManifestResult::kVerified);
  }
  Status VerifyError() {
    Result<ManifestResult> result = VerifyChecksumManifest(dir_);
    EXPECT_FALSE(result.ok());
    return result.ok() ? Status::Ok() : result.status();
  }

  fs::path dir_;
};

TEST_F(ChecksumFilesTest, KnownVectors) {
  Result<Sha256Digest> empty = Sha256OfFile(Write("empty", ""));
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(ToHex(*empty), kEmptyHex);
  Result<Sha256Digest> abc = Sha256OfFile(Write("abc", "abc"));
  ASSERT_TRUE(abc.ok()) << abc.status().ToString();
  EXPECT_EQ(ToHex(*abc), kAbcHex);
  // FIPS 180-2's two-block message.
  Result<Sha256Digest> two_blocks =
      Sha256OfFile(Write("two", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"));
  ASSERT_TRUE(two_blocks.ok());
  EXPECT_EQ(ToHex(*two_blocks), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST_F(ChecksumFilesTest, LargeFileMatchesSha256sum) {
  if (!HaveSha256sum()) GTEST_SKIP() << kSha256sum << " is not installed";
  // 5 MiB and a bit: several 1 MiB reads and a short last one; bytes that differ from chunk to chunk.
  std::string contents(5 * (size_t{1} << 20) + 3, '\0');
  uint32_t x = 12345;
  for (char& c : contents) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  const fs::path file = Write("large.bin", contents);
  Result<Sha256Digest> digest = Sha256OfFile(file);
  ASSERT_TRUE(digest.ok()) << digest.status().ToString();
  EXPECT_EQ(ToHex(*digest), Sha256sumOf(file));
}

TEST_F(ChecksumFilesTest, Sha256OfFileErrors) {
  Result<Sha256Digest> missing = Sha256OfFile(dir_ / "missing");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), (dir_ / "missing").string() + ": no such file");

  Result<Sha256Digest> directory = Sha256OfFile(dir_);
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(directory.status().message(), HasSubstr("not a regular file"));

  // A FIFO without a writer: refused at once, not waited on.
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  Result<Sha256Digest> fifo = Sha256OfFile(dir_ / "fifo");
  ASSERT_FALSE(fifo.ok());
  EXPECT_EQ(fifo.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ChecksumFilesTest, FollowsSymlinks) {
  Write("abc", "abc");
  fs::create_symlink("abc", dir_ / "link");
  Result<Sha256Digest> digest = Sha256OfFile(dir_ / "link");
  ASSERT_TRUE(digest.ok()) << digest.status().ToString();
  EXPECT_EQ(ToHex(*digest), kAbcHex);
}

TEST_F(ChecksumFilesTest, AbsentManifest) {
  Write("model.pt", "weights");
  Result<ManifestResult> result = VerifyChecksumManifest(dir_);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(*result, ManifestResult::kAbsent);
}

TEST_F(ChecksumFilesTest, MissingDirectory) {
  Result<ManifestResult> result = VerifyChecksumManifest(dir_ / "7");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
}

TEST_F(ChecksumFilesTest, AcceptsWhatSha256sumWrites) {
  if (!HaveSha256sum()) GTEST_SKIP() << kSha256sum << " is not installed";
  Write("model.pt", "weights");
  Write("with space.bin", "spaced");
  Write("sub/x", "in a subdirectory");
  Write("empty", "");
  for (const char* options : {"", "-b", "--tag"}) {
    SCOPED_TRACE(options);
    Shell(std::string(kSha256sum) + " " + options + " model.pt 'with space.bin' sub/x empty > SHA256SUMS");
    ExpectVerified();
    Result<std::vector<ChecksumEntry>> parsed = ParseChecksumManifest(Read("SHA256SUMS"));
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    const std::vector<Entry> want = {{"model.pt", Sha256sumOf(dir_ / "model.pt")},
                                     {"with space.bin", Sha256sumOf(dir_ / "with space.bin")},
                                     {"sub/x", Sha256sumOf(dir_ / "sub/x")},
                                     {"empty", kEmptyHex}};
    EXPECT_EQ(Entries(*parsed), want);
  }
}

TEST_F(ChecksumFilesTest, AcceptsSha256sumsEscapedNames) {
  if (!HaveSha256sum()) GTEST_SKIP() << kSha256sum << " is not installed";
  Write("back\\slash", "1");
  Write("new\nline", "2");
  Write("carriage\rreturn", "3");  // written as "\r" by coreutils >= 9.0 only
  Write("plain", "4");
  for (const char* options : {"", "--tag"}) {
    SCOPED_TRACE(options);
    Shell(std::string(kSha256sum) + " " + options + " * > SHA256SUMS");
    ExpectVerified();
    Result<std::vector<ChecksumEntry>> parsed = ParseChecksumManifest(Read("SHA256SUMS"));
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(parsed->size(), 4u);
  }
}

TEST_F(ChecksumFilesTest, SkipsItsOwnEntry) {
  if (!HaveSha256sum()) GTEST_SKIP() << kSha256sum << " is not installed";
  Write("model.pt", "weights");
  Shell(std::string(kSha256sum) + " * > SHA256SUMS");
  // Run again, as someone refreshing the manifest would: now it lists the old SHA256SUMS, whose digest the new
  // one cannot match.
  Shell(std::string(kSha256sum) + " * > SHA256SUMS.new && mv SHA256SUMS.new SHA256SUMS");
  EXPECT_THAT(Read("SHA256SUMS"), HasSubstr("  SHA256SUMS\n"));
  ExpectVerified();
}

TEST_F(ChecksumFilesTest, AcceptsFindOutput) {
  if (!HaveSha256sum()) GTEST_SKIP() << kSha256sum << " is not installed";
  Write("model.pt", "weights");
  Write("sub/deeper/x", "x");
  Shell("find . -type f ! -name SHA256SUMS -exec " + std::string(kSha256sum) + " {} + > SHA256SUMS");
  EXPECT_THAT(Read("SHA256SUMS"), HasSubstr("  ./sub/deeper/x\n"));
  ExpectVerified();
}

TEST_F(ChecksumFilesTest, MismatchNamesTheFile) {
  Write("model.pt", "abc");
  Write("other", "");
  Write("SHA256SUMS", std::string(kEmptyHex) + "  other\n" + kEmptyHex + "  model.pt\n");
  Status status = VerifyError();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), std::string("SHA256SUMS: model.pt: checksum mismatch (listed ") + kEmptyHex +
                                  ", file has " + kAbcHex + ")");
}

TEST_F(ChecksumFilesTest, MismatchAfterAChange) {
  if (!HaveSha256sum()) GTEST_SKIP() << kSha256sum << " is not installed";
  Write("model.pt", "weights");
  Write("sub/x", "x");
  Shell(std::string(kSha256sum) + " model.pt sub/x > SHA256SUMS");
  ExpectVerified();
  Write("sub/x", "y");
  Status status = VerifyError();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), StartsWith("SHA256SUMS: sub/x: checksum mismatch (listed "));
}

TEST_F(ChecksumFilesTest, MissingFileNamesTheFile) {
  Write("SHA256SUMS", std::string(kEmptyHex) + "  present\n" + kEmptyHex + "  sub/model.pt\n");
  Write("present", "");
  Status status = VerifyError();
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "SHA256SUMS: sub/model.pt: listed but missing");

  // A parent that is a file, and a dangling symlink, are missing too.
  Write("SHA256SUMS", std::string(kEmptyHex) + "  present/x\n");
  EXPECT_EQ(VerifyError().message(), "SHA256SUMS: present/x: listed but missing");
  fs::create_symlink("nowhere", dir_ / "dangling");
  Write("SHA256SUMS", std::string(kEmptyHex) + "  dangling\n");
  EXPECT_EQ(VerifyError().message(), "SHA256SUMS: dangling: listed but missing");
}

TEST_F(ChecksumFilesTest, MissingNameIsEscapedInTheMessage) {
  Write("SHA256SUMS", "\\" + std::string(kEmptyHex) + "  evil\\n2024-01-01 INFO all good\n");
  EXPECT_EQ(VerifyError().message(), "SHA256SUMS: evil\\n2024-01-01 INFO all good: listed but missing");
}

TEST_F(ChecksumFilesTest, ListedDirectoryOrFifoIsNotARegularFile) {
  fs::create_directories(dir_ / "sub");
  Write("SHA256SUMS", std::string(kEmptyHex) + "  sub\n");
  Status status = VerifyError();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "SHA256SUMS: sub: not a regular file");

  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  Write("SHA256SUMS", std::string(kEmptyHex) + "  fifo\n");
  EXPECT_EQ(VerifyError().message(), "SHA256SUMS: fifo: not a regular file");
}

TEST_F(ChecksumFilesTest, FollowsSymlinkedEntries) {
  Write("blobs/abc", "abc");
  fs::create_directories(dir_ / "3");
  fs::create_symlink("../blobs/abc", dir_ / "3" / "model.pt");
  Write("3/SHA256SUMS", std::string(kAbcHex) + "  model.pt\n");
  Result<ManifestResult> result = VerifyChecksumManifest(dir_ / "3");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(*result, ManifestResult::kVerified);
}

TEST_F(ChecksumFilesTest, ManifestThatListsNothing) {
  Write("model.pt", "weights");
  for (const std::string& text : {std::string(), std::string("\n\n"), std::string(kEmptyHex) + "  SHA256SUMS\n"}) {
    Write("SHA256SUMS", text);
    Status status = VerifyError();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), "SHA256SUMS: lists no files, so it would verify nothing");
  }
}

TEST_F(ChecksumFilesTest, MalformedManifest) {
  Write("model.pt", "weights");
  Write("SHA256SUMS", std::string(kEmptyHex) + "  model.pt\n" + kEmptyHex + "  ../outside\n");
  Status status = VerifyError();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "SHA256SUMS:2: path \"../outside\" has a \"..\" component");
}

TEST_F(ChecksumFilesTest, ManifestTooLarge) {
  Write("SHA256SUMS", std::string(kMaxChecksumManifestBytes + 1, '\n'));
  Status status = VerifyError();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "SHA256SUMS: larger than 1048576 bytes, the limit for a manifest");
}

TEST_F(ChecksumFilesTest, ManifestThatIsNotAFile) {
  fs::create_directories(dir_ / "SHA256SUMS");
  Status status = VerifyError();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "SHA256SUMS: not a regular file");
}

TEST_F(ChecksumFilesTest, UnreadableFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  Write("model.pt", "weights");
  Write("SHA256SUMS", std::string(kEmptyHex) + "  model.pt\n");
  fs::permissions(dir_ / "model.pt", fs::perms::none);
  Status status = VerifyError();
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_THAT(status.message(), StartsWith("SHA256SUMS: model.pt: cannot be opened: "));
  EXPECT_THAT(status.message(), Not(HasSubstr(dir_.string())));
}

}  // namespace
}  // namespace weft
