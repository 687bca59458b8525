#pragma once
// Ctrl-C in `specula chat`: SIGINT only sets a flag (no work in a signal handler), which the
// generation callback and the line readers read. Threads started while SIGINT is blocked (the
// engine's pool) never receive it, so it always interrupts the main thread's wait at the prompt.
namespace specula::cli {

// Installs the flag-setting handler without SA_RESTART, so a blocking wait returns EINTR.
void install_sigint_flag();
bool sigint_received();
void clear_sigint();

void block_sigint_in_new_threads();
void unblock_sigint();

enum class ByteRead { Byte, End, Interrupted };

// One byte of `fd` with read(2) (no stdio buffering to interrupt): Byte, End (end of input or a
// read error), or Interrupted when SIGINT comes first. A Ctrl-C just before the wait is never lost.
ByteRead read_byte_unless_interrupted(int fd, char& byte);

}  // namespace specula::cli
