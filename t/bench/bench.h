
/*
 * What the benchmark programs share.
 */

#ifndef _NGX_BENCH_H_INCLUDED_
#define _NGX_BENCH_H_INCLUDED_


#include <time.h>


/* monotonic seconds */
static inline double
ngx_bench_now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);

    return ts.tv_sec + ts.tv_nsec / 1e9;
}


#endif /* _NGX_BENCH_H_INCLUDED_ */
