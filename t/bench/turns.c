
/*
 * A profile of event loop turns, preloaded into nginx: the time from one
 * epoll_wait() return to the next call is what the worker spends on a
 * turn, and so what a keystroke arriving during it waits for.  CPU time
 * (the worker's own work) and wall time (with preemption and blocking
 * system calls) are counted in 50 us buckets and written to TURNS_FILE
 * every 1000 turns and at exit.
 *
 *   TURNS_FILE=/tmp/turns.txt LD_PRELOAD=build/turns.so perl t/bench/...
 *
 * The file must be writable by nginx's worker user.
 */

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>


#define NGX_TURNS_BUCKETS  64
#define NGX_TURNS_US       50


typedef int (*ngx_turns_wait_pt)(int, struct epoll_event *, int, int);


static ngx_turns_wait_pt  real_wait;
static char              *out;
static double             cpu_last = -1, wall_last;
static double             cpu_total, cpu_max, wall_max;
static unsigned long      turns;
static unsigned long      cpu_hist[NGX_TURNS_BUCKETS];
static unsigned long      wall_hist[NGX_TURNS_BUCKETS];


static double
us(clockid_t clock)
{
    struct timespec  ts;

    clock_gettime(clock, &ts);

    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}


static void
count(unsigned long *hist, double d)
{
    int  b;

    b = (int) (d / NGX_TURNS_US);
    hist[b < NGX_TURNS_BUCKETS ? b : NGX_TURNS_BUCKETS - 1]++;
}


static void
dump_hist(FILE *f, const char *name, unsigned long *hist)
{
    int            i;
    unsigned long  c;

    for (c = 0, i = 0; i < NGX_TURNS_BUCKETS; i++) {
        c += hist[i];

        if (hist[i]) {
            fprintf(f, "%s <%d us: %lu (cumulative %.4f)\n", name,
                    (i + 1) * NGX_TURNS_US, hist[i], (double) c / turns);
        }
    }
}


__attribute__((destructor)) static void
dump(void)
{
    FILE  *f;

    if (out == NULL || turns == 0) {
        return;
    }

    f = fopen(out, "w");
    if (f == NULL) {
        return;
    }

    fprintf(f, "pid %d: %lu turns, %.0f us CPU, longest %.0f us CPU, "
            "%.0f us wall\n", (int) getpid(), turns, cpu_total, cpu_max,
            wall_max);
    dump_hist(f, "cpu", cpu_hist);
    dump_hist(f, "wall", wall_hist);
    fclose(f);
}


/* nginx replaces its environment: read it before */
__attribute__((constructor)) static void
init(void)
{
    char  *f;

    f = getenv("TURNS_FILE");
    out = f ? strdup(f) : NULL;
}


int
epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
    int     rc;
    double  cpu, d;

    cpu = us(CLOCK_THREAD_CPUTIME_ID);

    if (real_wait == NULL) {
        real_wait = (ngx_turns_wait_pt) dlsym(RTLD_NEXT, "epoll_wait");
    }

    if (cpu_last >= 0 && out) {
        d = cpu - cpu_last;
        count(cpu_hist, d);
        cpu_total += d;
        cpu_max = d > cpu_max ? d : cpu_max;

        d = us(CLOCK_MONOTONIC) - wall_last;
        count(wall_hist, d);
        wall_max = d > wall_max ? d : wall_max;

        if (++turns % 1000 == 0) {
            dump();
        }
    }

    rc = real_wait(epfd, events, maxevents, timeout);

    cpu_last = us(CLOCK_THREAD_CPUTIME_ID);
    wall_last = us(CLOCK_MONOTONIC);

    return rc;
}
