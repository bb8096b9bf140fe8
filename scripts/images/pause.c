/*
 * pause: the process that holds a pod sandbox's namespaces open.
 *
 * Behaviour (the same contract as the upstream Kubernetes pause container,
 * written independently for minikubelet's offline test images):
 *   - sleeps in pause(2) forever, using no CPU;
 *   - as PID 1 of a shared PID namespace it reaps every child that exits
 *     (SIGCHLD -> waitpid(-1, ..., WNOHANG) until none are left);
 *   - exits with status 0 on SIGINT or SIGTERM;
 *   - `pause -v` prints its version and exits 0.
 *
 * Built statically (gcc -static) so the image holds only this one file.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAUSE_VERSION "minikubelet-pause 3.10"

static void on_terminate(int signo)
{
    (void)signo;
    /* _exit is async-signal-safe; nothing to flush or clean up. */
    _exit(0);
}

static void on_child(int signo)
{
    int saved_errno = errno;
    (void)signo;
    /* Several children may have exited behind a single SIGCHLD. */
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    errno = saved_errno;
}

static int install(int signo, void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (signo == SIGCHLD) {
        sa.sa_flags |= SA_NOCLDSTOP;
    }
    return sigaction(signo, &sa, NULL);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        puts(PAUSE_VERSION);
        return 0;
    }
    if (getpid() != 1) {
        /* Still useful (e.g. in tests), but a sandbox should run it as PID 1. */
        fputs("pause: warning: not running as PID 1\n", stderr);
    }
    if (install(SIGINT, on_terminate) != 0 || install(SIGTERM, on_terminate) != 0 ||
        install(SIGCHLD, on_child) != 0) {
        perror("pause: sigaction");
        return 1;
    }
    for (;;) {
        pause();
    }
    /* Not reached: pause() only returns after a handled signal, and we loop. */
    return 42;
}
