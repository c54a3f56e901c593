/* A fork-and-exit chain (tests/processes.rs, issue 30): every 2 ms the running process forks
 * a child and exits, forever, so the chain is a new pid at every look. Started by the fake
 * nccl-tests script; compiled with `cc` when the test runs. */
#include <unistd.h>

int main(void) {
    for (;;) {
        usleep(2000);
        pid_t child = fork();
        if (child > 0)
            _exit(0); /* the parent goes; the child carries on */
        if (child < 0)
            usleep(10000); /* out of pids for a moment: retry */
    }
}
