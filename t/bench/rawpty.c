
/*
 * The raw PTY reference: runs a command on a fresh PTY of the given size
 * and reads the master as fast as it can until the child is done.
 * Prints "bytes seconds".
 *
 *   rawpty COLS ROWS COMMAND
 */

#include <errno.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"



int
main(int argc, char **argv)
{
    int             master, status;
    char            buf[65536];
    pid_t           pid;
    ssize_t         n;
    double          start;
    unsigned long   total;
    struct winsize  ws;

    if (argc != 4) {
        fprintf(stderr, "usage: rawpty COLS ROWS COMMAND\n");
        return 2;
    }

    memset(&ws, 0, sizeof(ws));
    ws.ws_col = (unsigned short) atoi(argv[1]);
    ws.ws_row = (unsigned short) atoi(argv[2]);

    start = ngx_bench_now();

    pid = forkpty(&master, NULL, NULL, &ws);

    if (pid == -1) {
        perror("forkpty");
        return 1;
    }

    if (pid == 0) {
        execl("/bin/bash", "bash", "-c", argv[3], (char *) NULL);
        _exit(127);
    }

    total = 0;

    for ( ;; ) {
        n = read(master, buf, sizeof(buf));

        if (n > 0) {
            total += n;
            continue;
        }

        if (n == -1 && errno == EINTR) {
            continue;
        }

        break;      /* EIO: the child side is closed */
    }

    printf("%lu %.6f\n", total, ngx_bench_now() - start);

    (void) waitpid(pid, &status, 0);

    return 0;
}
