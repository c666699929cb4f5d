
/*
 * The bare PTY floors the latency figures are compared with.
 *
 *   ptylat echo N
 *       forkpty() of cat; N times writes one byte to the master and reads
 *       its echo; prints the round trips in microseconds, sorted
 *   ptylat start N PROGRAM [ARG...]
 *       N times forkpty() + execv() of the program until the first byte
 *       of output is read from the master; prints the times in
 *       microseconds, sorted
 */

#include <errno.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"


static pid_t
spawn(int *master, char **argv)
{
    pid_t           pid;
    struct winsize  ws;

    memset(&ws, 0, sizeof(ws));
    ws.ws_col = 120;
    ws.ws_row = 30;

    pid = forkpty(master, NULL, NULL, &ws);

    if (pid == -1) {
        perror("forkpty");
        exit(1);
    }

    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }

    return pid;
}


/* the first byte the master gives */
static void
first_byte(int master)
{
    char     c;
    ssize_t  n;

    do {
        n = read(master, &c, 1);
    } while (n == -1 && errno == EINTR);

    if (n != 1) {
        fprintf(stderr, "ptylat: no output\n");
        exit(1);
    }
}


static int
cmp(const void *a, const void *b)
{
    double  x = *(const double *) a, y = *(const double *) b;

    return (x > y) - (x < y);
}


int
main(int argc, char **argv)
{
    int      i, n, master, status;
    char    *cat[] = { "/bin/cat", NULL };
    pid_t    pid;
    double   t0, *lat;

    if (argc < 3 || (strcmp(argv[1], "start") == 0 && argc < 4)) {
        fprintf(stderr, "usage: ptylat echo N | ptylat start N PROGRAM...\n");
        return 2;
    }

    n = atoi(argv[2]);

    lat = calloc(n, sizeof(double));
    if (lat == NULL) {
        perror("calloc");
        return 1;
    }

    if (strcmp(argv[1], "echo") == 0) {
        pid = spawn(&master, cat);

        for (i = 0; i < n; i++) {
            t0 = ngx_bench_now();

            if (write(master, "x", 1) != 1) {
                perror("write");
                return 1;
            }

            first_byte(master);
            lat[i] = (ngx_bench_now() - t0) * 1e6;
        }

        (void) kill(pid, SIGKILL);
        (void) waitpid(pid, &status, 0);

    } else {
        for (i = 0; i < n; i++) {
            t0 = ngx_bench_now();
            pid = spawn(&master, argv + 3);
            first_byte(master);
            lat[i] = (ngx_bench_now() - t0) * 1e6;

            (void) kill(pid, SIGKILL);
            (void) waitpid(pid, &status, 0);
            (void) close(master);
        }
    }

    qsort(lat, n, sizeof(double), cmp);

    for (i = 0; i < n; i++) {
        printf("%.1f\n", lat[i]);
    }

    return 0;
}
