#include "loadgen/transport.h"

namespace weft {

TransportReply ExchangeOnce(const Transport& transport, const PreparedRequest& request,
                            std::chrono::nanoseconds timeout) {
  boost::asio::io_context io;
  std::shared_ptr<Channel> channel = transport.OpenChannel(io);
  TransportReply result;
  channel->Send(transport.Encode(request), std::chrono::steady_clock::now() + timeout,
                [&result](TransportReply reply) { result = std::move(reply); });
  io.run();  // returns once the exchange ended: nothing else is queued on `io`
  channel->Close();
  return result;
}

}  // namespace weft
