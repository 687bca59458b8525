// server/lingering_closer.h: a handed-over socket stays open until its peer closes or the linger
// time passes, what the peer sends meanwhile is dropped, a full closer closes its oldest socket, and stop()
// closes everything.
#include "specula/server/lingering_closer.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

namespace specula::server {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct Pair {
  int ours = -1;    // handed to the closer
  int theirs = -1;  // the "client"
  Pair() {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0) {
      ours = fds[0];
      theirs = fds[1];
    }
  }
  ~Pair() {
    if (theirs >= 0) close(theirs);
  }
};

// Seconds until the client's side reads end of file (the closer closed ours), or -1 after `limit`.
double seconds_until_closed(int fd, milliseconds limit) {
  const auto t0 = Clock::now();
  while (Clock::now() - t0 < limit) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10) > 0) {
      char c;
      const ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
      if (n == 0) return std::chrono::duration<double>(Clock::now() - t0).count();
    }
  }
  return -1;
}

TEST(LingeringCloser, KeepsASocketUntilTheLingerTimeAndDropsWhatArrives) {
  LingeringCloser closer(4, milliseconds(300));
  Pair p;
  ASSERT_GE(p.ours, 0);
  closer.add(p.ours);
  EXPECT_EQ(closer.waiting(), 1u);
  const char request[] = "POST / HTTP/1.1\r\n";
  ASSERT_EQ(send(p.theirs, request, sizeof request, 0), static_cast<ssize_t>(sizeof request));
  const double s = seconds_until_closed(p.theirs, milliseconds(5000));
  EXPECT_GE(s, 0.2);
  EXPECT_LT(s, 3.0);
  EXPECT_EQ(closer.waiting(), 0u);
}

TEST(LingeringCloser, ClosesAtOnceWhenThePeerHangsUp) {
  LingeringCloser closer(4, milliseconds(60000));
  Pair p;
  ASSERT_GE(p.ours, 0);
  closer.add(p.ours);
  shutdown(p.theirs, SHUT_WR);  // the client has read its answer and closes
  // Our side is closed well before the linger time: the client then reads end of file.
  EXPECT_GE(seconds_until_closed(p.theirs, milliseconds(5000)), 0.0);
}

TEST(LingeringCloser, AFullCloserMakesRoomByClosingTheOldestAndAStoppedOneClosesAtOnce) {
  LingeringCloser closer(1, milliseconds(60000));
  Pair first, second, third;
  closer.add(first.ours);
  closer.add(second.ours);  // over capacity: the first, waiting longest, is closed
  const double s = seconds_until_closed(first.theirs, milliseconds(2000));
  EXPECT_GE(s, 0.0);
  EXPECT_LT(s, 1.0);
  EXPECT_EQ(closer.waiting(), 1u);
  EXPECT_LT(seconds_until_closed(second.theirs, milliseconds(200)), 0.0);  // still lingering

  closer.stop();
  EXPECT_EQ(closer.waiting(), 0u);
  EXPECT_GE(seconds_until_closed(second.theirs, milliseconds(2000)), 0.0);
  closer.add(third.ours);  // after stop
  EXPECT_GE(seconds_until_closed(third.theirs, milliseconds(2000)), 0.0);
}

}  // namespace
}  // namespace specula::server
