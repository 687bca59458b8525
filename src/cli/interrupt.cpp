#include "cli/interrupt.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <csignal>

namespace specula::cli {

namespace {

volatile std::sig_atomic_t g_sigint = 0;

extern "C" void set_sigint_flag(int) { g_sigint = 1; }

sigset_t sigint_only() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  return set;
}

// The flag is checked with SIGINT blocked and ppoll unblocks it atomically, so a signal between
// the check and the wait still ends the wait.
bool wait_readable_unless_interrupted(int fd) {
  const sigset_t set = sigint_only();
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, &set, &old);
  bool interrupted = g_sigint != 0;
  while (!interrupted) {
    struct pollfd p = {fd, POLLIN, 0};
    const int r = ppoll(&p, 1, nullptr, &old);
    if (r > 0 || (r < 0 && errno != EINTR)) break;
    interrupted = g_sigint != 0;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return !interrupted;
}

}  // namespace

void install_sigint_flag() {
  struct sigaction sa = {};
  sa.sa_handler = set_sigint_flag;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
}

bool sigint_received() { return g_sigint != 0; }

void clear_sigint() { g_sigint = 0; }

void block_sigint_in_new_threads() {
  const sigset_t set = sigint_only();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void unblock_sigint() {
  const sigset_t set = sigint_only();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

ByteRead read_byte_unless_interrupted(int fd, char& byte) {
  for (;;) {
    if (!wait_readable_unless_interrupted(fd)) return ByteRead::Interrupted;
    const ssize_t n = ::read(fd, &byte, 1);
    if (n == 1) return ByteRead::Byte;
    if (n == 0 || errno != EINTR) return ByteRead::End;
    if (g_sigint != 0) return ByteRead::Interrupted;
  }
}

}  // namespace specula::cli
