#define _GNU_SOURCE
#include "CFerryProcess.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif

/*
 * One spawner thread does every fork. PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, and the
 * threads of Swift's cooperative pool come and go; this thread lives as long as the process.
 */
struct spawn_request {
    const char *path;
    char *const *argv;
    char *const *envp;
    int fds[3];
    int niceness;
    int idle;
    pid_t pid;
    int error;
    int done;
};

static pthread_mutex_t spawner_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t spawner_wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t spawner_done = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t callers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct spawn_request *spawner_slot;
static pthread_once_t spawner_once = PTHREAD_ONCE_INIT;
static int spawner_start_error;

static void close_from(int lowest) {
#if defined(__linux__) && defined(SYS_close_range)
    if (syscall(SYS_close_range, (unsigned)lowest, ~0U, 0) == 0) return;
#endif
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536) max = 65536;
    for (int fd = lowest; fd < max; fd++) close(fd);
}

/* Runs in the child between fork and exec: async-signal-safe calls only. */
static void child(struct spawn_request *request, pid_t parent, int report) {
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127); /* the server died before the request was armed */
#endif
    (void)parent;
    setpgid(0, 0);
    if (request->niceness > 0) setpriority(PRIO_PROCESS, 0, request->niceness);
#ifdef SCHED_IDLE
    if (request->idle) {
        struct sched_param none;
        memset(&none, 0, sizeof none);
        sched_setscheduler(0, SCHED_IDLE, &none);
    }
#endif
    /* Signals the server ignores or blocks are not the tool's business. */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    int null = open("/dev/null", O_RDWR);
    int targets[3];
    for (int i = 0; i < 3; i++) targets[i] = request->fds[i] >= 0 ? request->fds[i] : null;
    /* Move the sources above 2 first, so dup2 onto 0-2 never clobbers a source still needed. */
    for (int i = 0; i < 3; i++) {
        if (targets[i] >= 0 && targets[i] < 3) targets[i] = fcntl(targets[i], F_DUPFD, 3);
    }
    int keep_report = fcntl(report, F_DUPFD, 3 + 3);
    for (int i = 0; i < 3; i++) {
        if (targets[i] < 0 || dup2(targets[i], i) < 0) goto fail;
    }
    if (keep_report < 0) goto fail;
    if (dup2(keep_report, 3) < 0) goto fail;
    fcntl(3, F_SETFD, FD_CLOEXEC);
    close_from(4);
    execve(request->path, request->argv, request->envp);
fail:;
    int error = errno;
    ssize_t ignored = write(3, &error, sizeof error);
    (void)ignored;
    _exit(127);
}

static void perform(struct spawn_request *request) {
    int report[2];
#ifdef __linux__
    if (pipe2(report, O_CLOEXEC) != 0) {
        request->error = errno;
        return;
    }
#else
    if (pipe(report) != 0) {
        request->error = errno;
        return;
    }
    fcntl(report[0], F_SETFD, FD_CLOEXEC);
    fcntl(report[1], F_SETFD, FD_CLOEXEC);
#endif
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        request->error = errno;
        close(report[0]);
        close(report[1]);
        return;
    }
    if (pid == 0) child(request, parent, report[1]);
    close(report[1]);
    /* Also set the group from here, so a kill sent right after the return reaches it. */
    setpgid(pid, pid);
    int error = 0;
    ssize_t got;
    do {
        got = read(report[0], &error, sizeof error);
    } while (got < 0 && errno == EINTR);
    close(report[0]);
    if (got == (ssize_t)sizeof error) {
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
        request->error = error ? error : ENOEXEC;
        return;
    }
    request->pid = pid;
    request->error = 0;
}

static void *spawner_main(void *unused) {
    (void)unused;
    /* The thread blocks every signal: none is ever delivered to it, so its sleeps are never cut short. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, NULL);
    pthread_mutex_lock(&spawner_lock);
    for (;;) {
        while (spawner_slot == NULL) pthread_cond_wait(&spawner_wake, &spawner_lock);
        struct spawn_request *request = spawner_slot;
        spawner_slot = NULL;
        pthread_mutex_unlock(&spawner_lock);
        perform(request);
        pthread_mutex_lock(&spawner_lock);
        request->done = 1;
        pthread_cond_broadcast(&spawner_done);
    }
    return NULL;
}

static void start_spawner(void) {
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    spawner_start_error = pthread_create(&thread, &attributes, spawner_main, NULL);
    pthread_attr_destroy(&attributes);
}

int ferry_spawn(const char *path, char *const argv[], char *const envp[], int stdin_fd, int stdout_fd,
                int stderr_fd, int niceness, int idle, pid_t *pid_out) {
    pthread_once(&spawner_once, start_spawner);
    if (spawner_start_error) return spawner_start_error;
    struct spawn_request request;
    memset(&request, 0, sizeof request);
    request.path = path;
    request.argv = argv;
    request.envp = envp;
    request.fds[0] = stdin_fd;
    request.fds[1] = stdout_fd;
    request.fds[2] = stderr_fd;
    request.niceness = niceness;
    request.idle = idle;
    pthread_mutex_lock(&callers_lock);
    pthread_mutex_lock(&spawner_lock);
    spawner_slot = &request;
    pthread_cond_signal(&spawner_wake);
    while (!request.done) pthread_cond_wait(&spawner_done, &spawner_lock);
    pthread_mutex_unlock(&spawner_lock);
    pthread_mutex_unlock(&callers_lock);
    if (request.error == 0 && pid_out) *pid_out = request.pid;
    return request.error;
}

int ferry_kill_group(pid_t pid, int signal) {
    if (pid <= 0) return EINVAL;
    int group = kill(-pid, signal);
    int single = kill(pid, signal);
    return (group == 0 || single == 0) ? 0 : errno;
}

int ferry_try_wait(pid_t pid, int *status) {
    pid_t result;
    do {
        result = waitpid(pid, status, WNOHANG);
    } while (result < 0 && errno == EINTR);
    if (result < 0) return -1;
    return result == 0 ? 0 : 1;
}

int ferry_exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

int ferry_term_signal(int status) { return WIFSIGNALED(status) ? WTERMSIG(status) : 0; }
