
/*
 * Doorbells: abstract unix datagram sockets, one per worker, and the
 * worker table in the zone that says who can be rung.
 */

#include "ngx_pty.h"
#include "ngx_pty_doorbell.h"
#include "ngx_pty_session.h"

#include <sys/un.h>


static socklen_t ngx_pty_doorbell_address(struct sockaddr_un *sa,
    ngx_pid_t pid);
static ngx_int_t ngx_pty_doorbell_claim(ngx_pty_shm_t *sh);
static void ngx_pty_doorbell_handler(ngx_event_t *rev);
static void ngx_pty_doorbell_send(ngx_uint_t slot, ngx_pid_t pid,
    u_char what);
static ssize_t ngx_pty_doorbell_recv(ngx_connection_t *c, u_char *buf,
    size_t size);
static void ngx_pty_doorbell_foreign(ngx_log_t *log, struct ucred *cr);


#define NGX_PTY_BELL_LOG_EVERY  60      /* s between lines on strangers */


static ngx_connection_t  *ngx_pty_bell;
static ngx_int_t          ngx_pty_bell_slot = -1;
static uid_t              ngx_pty_bell_uid;     /* the workers' */


static socklen_t
ngx_pty_doorbell_address(struct sockaddr_un *sa, ngx_pid_t pid)
{
    u_char  *p;

    ngx_memzero(sa, sizeof(struct sockaddr_un));
    sa->sun_family = AF_UNIX;

    /* sun_path[0] == '\0': the abstract namespace, nothing on disk */
    p = ngx_snprintf((u_char *) sa->sun_path + 1, sizeof(sa->sun_path) - 1,
                     "ngx_pty_bell/%016xL/%P",
                     ngx_pty_shm_zone()->sh->nonce, pid);

    return (socklen_t) (offsetof(struct sockaddr_un, sun_path)
                        + (p - (u_char *) sa->sun_path));
}


/*
 * Binds this worker's doorbell, takes a slot in the worker table, and
 * takes over sessions a dead worker left behind (this may be the worker
 * the master started in place of one that was killed).
 */
ngx_int_t
ngx_pty_doorbell_init(ngx_cycle_t *cycle)
{
    int                  on;
    socklen_t            len;
    ngx_socket_t         fd;
    ngx_connection_t    *c;
    ngx_pty_zone_t      *zone;
    struct sockaddr_un   sa;

    zone = ngx_pty_shm_zone();
    if (zone == NULL) {
        return NGX_OK;
    }

    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd == (ngx_socket_t) -1) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_socket_errno,
                      "pty: socket() for the doorbell failed");
        return NGX_ERROR;
    }

    len = ngx_pty_doorbell_address(&sa, ngx_pid);

    /* the kernel says who sent each datagram: only the workers may ring */
    ngx_pty_bell_uid = geteuid();
    on = 1;

    if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(int)) == -1) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_socket_errno,
                      "pty: setsockopt(SO_PASSCRED) for the doorbell failed");
        close(fd);
        return NGX_ERROR;
    }

    if (bind(fd, (struct sockaddr *) &sa, len) == -1) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_socket_errno,
                      "pty: bind() of the doorbell \"@%s\" failed",
                      sa.sun_path + 1);
        close(fd);
        return NGX_ERROR;
    }

    c = ngx_get_connection(fd, cycle->log);
    if (c == NULL) {
        close(fd);
        return NGX_ERROR;
    }

    c->read->handler = ngx_pty_doorbell_handler;
    c->read->log = cycle->log;
    c->write->log = cycle->log;

    /* nginx calls idle connections when the worker is told to quit */
    c->idle = 1;
    ngx_pty_bell = c;

    if (ngx_handle_read_event(c->read, 0) != NGX_OK) {
        ngx_close_connection(c);
        ngx_pty_bell = NULL;
        return NGX_ERROR;
    }

    ngx_pty_bell_slot = ngx_pty_doorbell_claim(zone->sh);

    if (ngx_pty_bell_slot == -1) {
        ngx_log_error(NGX_LOG_ERR, cycle->log, 0,
                      "pty: more than %d workers: this one cannot be woken "
                      "by others and serves only sessions it owns",
                      NGX_PTY_WORKERS_MAX);
    }

    /* we may replace a killed worker: its sessions and members are ours */
    ngx_pty_sessions_adopt_orphans();
    ngx_pty_doorbell_orphans();

    return NGX_OK;
}


/* a free slot, or one whose worker is gone */
static ngx_int_t
ngx_pty_doorbell_claim(ngx_pty_shm_t *sh)
{
    ngx_uint_t            i;
    ngx_atomic_uint_t     pid;
    ngx_pty_worker_sh_t  *w;

    for (i = 0; i < NGX_PTY_WORKERS_MAX; i++) {
        w = &sh->workers[i];
        pid = w->pid;

        if (pid != 0 && ngx_pty_pid_alive((ngx_pid_t) pid)) {
            continue;
        }

        if (ngx_atomic_cmp_set(&w->pid, pid, ngx_pid)) {
            w->rung = 0;
            return i;
        }
    }

    return -1;
}


/* worker exit: no more rings for us */
void
ngx_pty_doorbell_exit(void)
{
    ngx_pty_zone_t  *zone;

    zone = ngx_pty_shm_zone();

    if (zone && ngx_pty_bell_slot != -1) {
        (void) ngx_atomic_cmp_set(&zone->sh->workers[ngx_pty_bell_slot].pid,
                                  ngx_pid, 0);
        ngx_pty_bell_slot = -1;
    }

    if (ngx_pty_bell) {
        ngx_close_connection(ngx_pty_bell);
        ngx_pty_bell = NULL;
    }
}


ngx_int_t
ngx_pty_doorbell_slot(void)
{
    return ngx_pty_bell_slot;
}


ngx_int_t
ngx_pty_doorbell_slot_of(ngx_pid_t pid)
{
    ngx_uint_t       i;
    ngx_pty_zone_t  *zone;

    zone = ngx_pty_shm_zone();

    if (zone == NULL || pid <= 0) {
        return -1;
    }

    for (i = 0; i < NGX_PTY_WORKERS_MAX; i++) {
        if (zone->sh->workers[i].pid == (ngx_atomic_uint_t) pid) {
            return i;
        }
    }

    return -1;
}


void
ngx_pty_mask_set(ngx_pty_mask_t *m, ngx_int_t slot, ngx_uint_t on)
{
    ngx_atomic_uint_t  bit;

    if (slot < 0) {
        return;
    }

    bit = (ngx_atomic_uint_t) 1 << (slot % NGX_PTY_MASK_BITS);

    if (on) {
        (void) __sync_fetch_and_or(&m->w[slot / NGX_PTY_MASK_BITS], bit);

    } else {
        (void) __sync_fetch_and_and(&m->w[slot / NGX_PTY_MASK_BITS], ~bit);
    }
}


ngx_uint_t
ngx_pty_mask_take(ngx_pty_mask_t *m, ngx_int_t slot)
{
    ngx_atomic_t       *w;
    ngx_atomic_uint_t   bit;

    if (slot < 0) {
        return 0;
    }

    w = &m->w[slot / NGX_PTY_MASK_BITS];
    bit = (ngx_atomic_uint_t) 1 << (slot % NGX_PTY_MASK_BITS);

    /*
     * A plain load first: callers walk every session this worker knows,
     * and a locked operation on each would take a cache line from the
     * other workers, for sessions that were not rung.
     */
    return (*w & bit) && (__sync_fetch_and_and(w, ~bit) & bit);
}


/*
 * The wake bits are set before the rung flags are tested, and a woken
 * worker clears its rung flag before it looks at the wake bits: either
 * it sees our bit, or we see its flag clear and ring again.
 */
void
ngx_pty_doorbell_wake(ngx_pty_session_sh_t *sh, const ngx_pty_mask_t *mask)
{
    ngx_uint_t            k, i, slot;
    ngx_atomic_uint_t     bits, pid;
    ngx_pty_zone_t       *zone;
    ngx_pty_worker_sh_t  *w;

    if (ngx_pty_bell == NULL) {
        return;
    }

    zone = ngx_pty_shm_zone();

    for (k = 0; k < NGX_PTY_MASK_WORDS; k++) {
        bits = mask->w[k];

        if (ngx_pty_bell_slot != -1
            && (ngx_uint_t) ngx_pty_bell_slot / NGX_PTY_MASK_BITS == k)
        {
            bits &= ~((ngx_atomic_uint_t) 1
                      << (ngx_pty_bell_slot % NGX_PTY_MASK_BITS));
        }

        if (bits == 0) {
            continue;
        }

        (void) __sync_fetch_and_or(&sh->wake_mask.w[k], bits);

        for (i = 0; bits; i++, bits >>= 1) {
            if (!(bits & 1)) {
                continue;
            }

            slot = k * NGX_PTY_MASK_BITS + i;
            w = &zone->sh->workers[slot];
            pid = w->pid;

            if (pid != 0 && ngx_atomic_cmp_set(&w->rung, 0, 1)) {
                ngx_pty_doorbell_send(slot, (ngx_pid_t) pid,
                                      NGX_PTY_BELL_WAKE);
            }
        }
    }
}


void
ngx_pty_doorbell_wake_slot(ngx_pty_session_sh_t *sh, ngx_int_t slot)
{
    ngx_pty_mask_t  mask;

    if (slot < 0) {
        return;
    }

    ngx_memzero(&mask, sizeof(ngx_pty_mask_t));
    ngx_pty_mask_set(&mask, slot, 1);
    ngx_pty_doorbell_wake(sh, &mask);
}


void
ngx_pty_doorbell_orphans(void)
{
    ngx_uint_t         i;
    ngx_pty_zone_t    *zone;
    ngx_atomic_uint_t  pid;

    zone = ngx_pty_shm_zone();

    if (zone == NULL || ngx_pty_bell == NULL) {
        return;
    }

    for (i = 0; i < NGX_PTY_WORKERS_MAX; i++) {
        pid = zone->sh->workers[i].pid;

        if (pid != 0 && pid != (ngx_atomic_uint_t) ngx_pid) {
            ngx_pty_doorbell_send(i, (ngx_pid_t) pid, NGX_PTY_BELL_ORPHANS);
        }
    }
}


static void
ngx_pty_doorbell_send(ngx_uint_t slot, ngx_pid_t pid, u_char what)
{
    ngx_err_t             err;
    socklen_t             len;
    ngx_pty_worker_sh_t  *w;
    struct sockaddr_un    sa;

    len = ngx_pty_doorbell_address(&sa, pid);

    if (sendto(ngx_pty_bell->fd, &what, 1, 0, (struct sockaddr *) &sa, len)
        == 1)
    {
        return;
    }

    err = ngx_socket_errno;
    w = &ngx_pty_shm_zone()->sh->workers[slot];

    if (err == NGX_EAGAIN) {
        /* its queue is full of rings: it will look anyway */
        return;
    }

    w->rung = 0;

    if (err == NGX_ECONNREFUSED) {
        /*
         * Nobody listens: the worker is exiting (it rings its orphans
         * itself), not yet reaped, or gone.  Gone: free its slot and
         * take its sessions over.
         */
        if (!ngx_pty_pid_alive(pid) && ngx_atomic_cmp_set(&w->pid, pid, 0)) {
            ngx_log_error(NGX_LOG_NOTICE, ngx_cycle->log, 0,
                          "pty: worker %P is gone; taking over its sessions",
                          pid);
            ngx_pty_sessions_adopt_orphans();
        }

        return;
    }

    ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, err,
                  "pty: ringing the doorbell of worker %P failed", pid);
}


static void
ngx_pty_doorbell_handler(ngx_event_t *rev)
{
    u_char             buf[64];
    ssize_t            n;
    ngx_err_t          err;
    ngx_uint_t         wake, orphans;
    ngx_pty_zone_t    *zone;
    ngx_connection_t  *c;

    c = rev->data;
    wake = 0;
    orphans = 0;

    if (c->close) {
        /* a graceful quit (reload): the doorbell stays until the exit */
        c->close = 0;
        c->idle = 0;
        ngx_pty_sessions_quit();
    }

    for ( ;; ) {
        n = ngx_pty_doorbell_recv(c, buf, sizeof(buf));

        if (n == 0) {
            /* not from a worker, or empty: dropped */
            continue;
        }

        if (n > 0) {
            if (buf[0] == NGX_PTY_BELL_ORPHANS) {
                orphans = 1;

            } else {
                wake = 1;
            }

            continue;
        }

        err = ngx_socket_errno;

        if (n == -1 && err == NGX_EINTR) {
            continue;
        }

        if (n == -1 && err != NGX_EAGAIN) {
            ngx_log_error(NGX_LOG_ERR, rev->log, err,
                          "pty: recv() on the doorbell failed");
        }

        break;
    }

    if (ngx_handle_read_event(rev, 0) != NGX_OK) {
        ngx_log_error(NGX_LOG_ERR, rev->log, 0,
                      "pty: cannot watch the doorbell");
    }

    zone = ngx_pty_shm_zone();

    if (wake && ngx_pty_bell_slot != -1) {
        /* before the walk: a ring after this point comes through */
        zone->sh->workers[ngx_pty_bell_slot].rung = 0;
        ngx_memory_barrier();

        ngx_pty_sessions_wake(ngx_pty_bell_slot);
    }

    if (orphans) {
        ngx_pty_sessions_adopt_orphans();
    }
}


/*
 * One datagram; 0 when it does not come from the workers' user (the
 * address is in the abstract namespace, which any local user may send
 * to: /proc/net/unix lists it).  The sender's pid is not checked against
 * the worker table: an exiting worker rings its orphans over after it
 * left its slot, and a ring dropped would leave its "rung" flag set, the
 * worker deaf for good.  A process of the workers' own user could signal
 * or trace them anyway.
 */
static ssize_t
ngx_pty_doorbell_recv(ngx_connection_t *c, u_char *buf, size_t size)
{
    ssize_t          n;
    struct iovec     iov;
    struct msghdr    mh;
    struct ucred    *cr;
    struct cmsghdr  *cm;
    union {
        struct cmsghdr  cm;
        char            space[CMSG_SPACE(sizeof(struct ucred))];
    } cmsg;

    iov.iov_base = buf;
    iov.iov_len = size;

    ngx_memzero(&mh, sizeof(struct msghdr));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = &cmsg;
    mh.msg_controllen = sizeof(cmsg);

    n = recvmsg(c->fd, &mh, 0);

    if (n == -1) {
        return -1;
    }

    cr = NULL;

    for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level == SOL_SOCKET
            && cm->cmsg_type == SCM_CREDENTIALS
            && cm->cmsg_len == CMSG_LEN(sizeof(struct ucred)))
        {
            cr = (struct ucred *) CMSG_DATA(cm);
        }
    }

    if (cr == NULL || cr->uid != ngx_pty_bell_uid) {
        ngx_pty_doorbell_foreign(c->log, cr);
        return 0;
    }

    return n;       /* 0: an empty datagram, which asks for nothing */
}


/* a line for the first stranger, then one a minute at most, with a count */
static void
ngx_pty_doorbell_foreign(ngx_log_t *log, struct ucred *cr)
{
    static time_t      last;
    static ngx_uint_t  dropped;

    dropped++;

    if (last && ngx_time() - last < NGX_PTY_BELL_LOG_EVERY) {
        return;
    }

    ngx_log_error(NGX_LOG_WARN, log, 0,
                  "pty: %ui doorbell datagram(s) not from nginx's workers "
                  "dropped, the last from uid %d, pid %P",
                  dropped, cr ? (int) cr->uid : -1,
                  cr ? (ngx_pid_t) cr->pid : (ngx_pid_t) -1);

    last = ngx_time();
    dropped = 0;
}
