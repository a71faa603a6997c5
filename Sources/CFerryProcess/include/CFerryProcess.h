/*
 * CFerryProcess -- starts the media tools (ffmpeg, ffprobe) as child processes that cannot outlive the server.
 *
 * ferry_spawn forks from one long-lived thread of its own and, in the child, before exec:
 *   - on Linux asks for SIGKILL when that thread (and so the server) dies (PR_SET_PDEATHSIG), so a SIGKILLed
 *     server leaves no ffmpeg running behind it;
 *   - starts a process group of its own (ferry_kill_group stops the tool and anything it started);
 *   - lowers its CPU priority by `niceness` (0 keeps it) and, with `idle` on Linux, gives it the SCHED_IDLE policy
 *     (it runs only on CPU time nothing else wants), so request handling goes first;
 *   - connects standard input, output and error to the given descriptors (-1: /dev/null) and closes every other
 *     descriptor.
 * The child runs `path` (an absolute path: no PATH search) with `argv` and `envp`; nothing passes through a shell.
 *
 * Returns 0 and stores the child's pid, or an errno value: from fork, or from the child's exec (reported through a
 * close-on-exec pipe, so a missing or non-executable tool is an error here, not a child that exits 127).
 */
#ifndef CFERRYPROCESS_H
#define CFERRYPROCESS_H

#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

int ferry_spawn(const char *path, char *const argv[], char *const envp[], int stdin_fd, int stdout_fd,
                int stderr_fd, int niceness, int idle, pid_t *pid_out);

/* Sends `signal` to the child's process group (and to the child itself, should it have left the group). */
int ferry_kill_group(pid_t pid, int signal);

/* Non-blocking wait: 0 while the child runs; 1 when it has ended (its wait status in *status); -1 with errno. */
int ferry_try_wait(pid_t pid, int *status);

/* Decoded wait status: the exit code (0-255) when it exited, else -1. */
int ferry_exit_code(int status);
/* The signal that ended it, else 0. */
int ferry_term_signal(int status);

#ifdef __cplusplus
}
#endif

#endif
