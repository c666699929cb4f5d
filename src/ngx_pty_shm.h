
/*
 * The shared zone (pty_zone): the session table, each session's frame ring
 * and membership.  Everything here is visible to every worker, so every
 * field is read and written under a lock that is held briefly and never
 * across I/O: the slab mutex for the table and allocation, the session's
 * spinlock for its state, ring and members.
 */

#ifndef _NGX_PTY_SHM_H_INCLUDED_
#define _NGX_PTY_SHM_H_INCLUDED_


#include "ngx_pty.h"


typedef enum {
    NGX_PTY_FRAME_PAD = 0,
    NGX_PTY_FRAME_OUTPUT,
    NGX_PTY_FRAME_RESIZE,
    NGX_PTY_FRAME_ROLE,
    NGX_PTY_FRAME_MEMBERSHIP,
    NGX_PTY_FRAME_KEYFRAME,
    NGX_PTY_FRAME_CLOSED,
    NGX_PTY_FRAME_ERROR,
    NGX_PTY_FRAME_REVOKE,        /* never sent: its target is revoked */
    NGX_PTY_FRAME_TASK           /* an A2A TaskStatusUpdate (ngx_pty_a2a.c) */
} ngx_pty_frame_kind_e;


/*
 * A ring record: a 64-byte header, then data (len bytes), the whole padded
 * to 64.  Because every record and every gap is a multiple of 64, the end
 * of a lap is always filled by an explicit PAD record whose len says how
 * far to skip: readers never need the ring's size to step over it, which
 * is what lets the ring grow in place of logical offsets (see grow).
 */
#define NGX_PTY_RING_ALIGN  64

typedef struct {
    uint64_t                   seq;
    uint64_t                   ts;        /* unix ms */
    uint64_t                   anchor;    /* Keyframe: last sequence folded */
    uint32_t                   len;
    uint32_t                   target;    /* client id, 0: every client */
    uint16_t                   kind;
    uint16_t                   cols;
    uint16_t                   rows;
    uint16_t                   reserved;
    u_char                     id[16];    /* the frame's UUIDv7 */
    uint64_t                   reserved2;
} ngx_pty_frame_t;


/*
 * The frame ring.  Its header lives in the session record, so its address
 * never changes; the data is a separate slab allocation that starts small
 * (NGX_PTY_RING_INITIAL) and doubles as output arrives: freely up to
 * grow_to (pty_ring_size), further up to max_size (pty_ring_max_size)
 * only while it holds fewer than min_frames (replay_buffer_frames).
 */
#define NGX_PTY_RING_INITIAL  2048

struct ngx_pty_ring_s {
    uint64_t                   head;      /* byte offsets, never wrap */
    uint64_t                   tail;
    uint64_t                   frames;
    size_t                     size;
    size_t                     grow_to;     /* pty_ring_size */
    size_t                     max_size;    /* growth stops here */
    uint64_t                   evicted;     /* frames evicted below min */
    uint32_t                   min_frames;  /* replay_buffer_frames */
    uint32_t                   grow_failed;
    uint32_t                   capped;      /* max_size: by
                                               pty_session_max_memory */
    ngx_uint_t                 archive;     /* pty_archive stores it */
    uint64_t                   stored;      /* records below are stored:
                                               it grows rather than evict
                                               one that is not, up to
                                               max_size */
    u_char                    *data;
};


/*
 * Raw output bytes for the agent API: the scrollback it promises.  Like
 * the ring it starts small and grows, before any byte is overwritten,
 * up to max_size (pty_scrollback_size); what it could not keep is counted
 * as missed by its readers, whatever its size.
 */
#define NGX_PTY_SCROLL_INITIAL  1024

typedef struct {
    uint64_t                   head;      /* bytes ever written */
    size_t                     size;
    size_t                     max_size;
    ngx_uint_t                 grow_failed;
    u_char                    *data;
} ngx_pty_scroll_t;


typedef enum {
    NGX_PTY_STATE_STARTING = 0,
    NGX_PTY_STATE_RUNNING,
    NGX_PTY_STATE_CLOSED,        /* Closed frame emitted; record lingers */
    NGX_PTY_STATE_GONE           /* unlinked; freed with its last ref */
} ngx_pty_state_e;


/* why a session ended: the zone's closed_reason, the archive's reason */
typedef enum {
    NGX_PTY_CLOSED_NORMAL = 0,
    NGX_PTY_CLOSED_KILLED,
    NGX_PTY_CLOSED_TIMEOUT,
    NGX_PTY_CLOSED_INSTANCE_TERMINATED,
    NGX_PTY_CLOSED_ERROR
} ngx_pty_closed_reason_e;


typedef enum {
    NGX_PTY_ROLE_OBSERVER = 0,
    NGX_PTY_ROLE_CONTROLLER
} ngx_pty_role_e;


typedef struct {
    ngx_queue_t                queue;
    uint32_t                   client_id;
    ngx_pid_t                  worker;
    ngx_uint_t                 role;
    size_t                     label_len;
    u_char                     label[NGX_PTY_LABEL_MAX * 4];
    size_t                     principal_len;   /* for revocation */
    u_char                     principal[255];
} ngx_pty_member_t;


/* a set of worker table slots (NGX_PTY_WORKERS_MAX below), word-atomic */
#define NGX_PTY_MASK_BITS   (8 * sizeof(ngx_atomic_uint_t))
#define NGX_PTY_MASK_WORDS  (256 / NGX_PTY_MASK_BITS)

typedef struct {
    ngx_atomic_t               w[NGX_PTY_MASK_WORDS];
} ngx_pty_mask_t;


struct ngx_pty_session_sh_s {
    ngx_rbtree_node_t          node;       /* key: hash of id */
    ngx_rbtree_node_t          name_node;  /* key: N of pty-N */
    ngx_queue_t                queue;

    ngx_atomic_t               lock;
    ngx_atomic_t               refs;

    u_char                     id[NGX_PTY_ID_LEN];
    ngx_uint_t                 name;

    ngx_uint_t                 state;
    ngx_pid_t                  owner;
    ngx_pid_t                  keeper;
    ngx_pid_t                  child;

    /* written by the keeper without a lock: (wait status << 1) | 1 */
    ngx_atomic_t               keeper_status;

    /* a new owner proves itself to the keeper with it (16 bytes) */
    u_char                     keeper_secret[16];

    ngx_int_t                  exit_code;     /* -1: unknown */
    ngx_uint_t                 closed_reason;
    uint64_t                   closed_at;     /* unix ms: the oldest ended
                                                 is forgotten first */

    uint64_t                   seq;           /* last assigned */
    uint64_t                   last_output;   /* seq of last Output/Resize */
    ngx_uint_t                 cols;
    ngx_uint_t                 rows;
    ngx_uint_t                 fresh;         /* no controller yet */

    time_t                     created;
    time_t                     active;

    ngx_uint_t                 controllers;
    ngx_uint_t                 observers;
    ngx_queue_t                members;

    /*
     * Doorbells (ngx_pty_doorbell.h): bit n stands for the worker in slot
     * n of the worker table.  listen: workers with listeners here or the
     * terminal; wake: workers that have something new here to look at.
     */
    ngx_pty_mask_t             listen_mask;
    ngx_pty_mask_t             wake_mask;

    /*
     * Requests of other workers for the owner, in order (ngx_pty_inbox_t):
     * allocated on the first one, grown up to inbox_max, given back when
     * the owner drains a large one.
     */
    u_char                    *inbox;
    size_t                     inbox_size;
    size_t                     inbox_len;
    size_t                     inbox_max;

    uint64_t                   api_cursor;    /* scrollback offset */

    /*
     * The agent reader, shared so that any worker can serve the next
     * call (ngx_pty_api.c): each worker has its own settled-text
     * converter and rebuilds it from api_line when another worker used
     * the reader last.  Used by one worker at a time: api_busy.
     */
    uint64_t                   api_line;      /* offset after the last LF fed */
    uint64_t                   api_delivered; /* settled bytes so far */
    uint64_t                   api_missed;    /* lost, not yet reported */
    ngx_atomic_t               api_epoch;     /* bumped on every rebuild */
    ngx_pid_t                  api_reader;    /* whose converter is current */
    ngx_atomic_t               api_busy;      /* pid using the reader */
    u_char                    *api_spill;     /* taken, not delivered */
    size_t                     api_spill_len;
    size_t                     api_spill_size;
    uint64_t                   api_input;     /* scrollback head when the
                                                 last input was written */
    uint64_t                   api_gap;       /* lost since the last line
                                                 boundary fed */
    ngx_uint_t                 api_resync;    /* skipping to a line feed
                                                 after a loss */
    ngx_uint_t                 tty_noecho;    /* input is not echoed (a
                                                 password prompt) */
    uint32_t                   loc_tag;       /* API location that started
                                                 it (pty_max_sessions) */

    /*
     * The archive's cursor (ngx_pty_store.c): every frame up to arch_seq
     * is stored, and ring->stored is the ring offset after it.  One
     * worker at a time stores a session (arch_claim, a pid; a dead one's
     * claim is taken over), so the cursor moves only after a commit.
     */
    uint64_t                   arch_seq;
    ngx_atomic_t               arch_claim;
    ngx_uint_t                 arch_ended;    /* its end is stored */
    ngx_uint_t                 restored;      /* an ended session of the
                                                 archive, brought back for
                                                 a client: never stored */

    ngx_pty_ring_t            *ring;        /* &ring_hdr */
    ngx_pty_scroll_t          *scroll;      /* &scroll_hdr */
    ngx_pty_ring_t             ring_hdr;
    ngx_pty_scroll_t           scroll_hdr;

    /* settings of the location that started it, for any later owner */
    ngx_pty_params_t           params;
    ngx_msec_t                 closed_linger;
    ngx_msec_t                 idle_timeout;
    ngx_msec_t                 max_age;
    ngx_uint_t                 answer_queries;
    ngx_uint_t                 terminate_on_last_controller;
    ngx_uint_t                 redact;        /* pty_redact: NGX_PTY_REDACT_*
                                                 shown masked, 0: off */
    ngx_pty_reveal_t          *reveal;        /* what it hid, for the rest */

    size_t                     command_len;
    u_char                    *command;

    /* who may reach it (ngx_pty_auth.c); set before it is linked */
    size_t                     acl_len;
    u_char                    *acl;
};


/* a worker that can be woken: its doorbell is named by nonce and pid */
#define NGX_PTY_WORKERS_MAX  (NGX_PTY_MASK_WORDS * NGX_PTY_MASK_BITS)

typedef struct {
    ngx_atomic_t               pid;       /* 0: a free slot */
    ngx_atomic_t               rung;      /* a wake is on its way: coalesce */
} ngx_pty_worker_sh_t;


/* one request of a non-owner worker to the owner, then len bytes */
typedef struct {
    uint32_t                   len;
    uint16_t                   type;      /* ngx_pty_inbox_type_e */
    uint16_t                   cols;
    uint16_t                   rows;
    uint16_t                   arg;       /* kill: reason | detail << 8 */
    uint32_t                   target;    /* keyframe: client id */
} ngx_pty_inbox_t;


typedef enum {
    NGX_PTY_INBOX_INPUT = 1,
    NGX_PTY_INBOX_RESIZE,
    NGX_PTY_INBOX_KEYFRAME,
    NGX_PTY_INBOX_KILL
} ngx_pty_inbox_type_e;


/* what is left of a session forgotten: for the answer to a late caller */
#define NGX_PTY_TOMBS  128

typedef struct {
    ngx_uint_t                 name;
    u_char                     id[NGX_PTY_ID_LEN];
    uint64_t                   closed_at;     /* unix ms; 0: not ended */
    ngx_int_t                  exit_code;
    ngx_uint_t                 closed_reason;
} ngx_pty_tomb_t;


/*
 * A revocation: connections of that principal made before it end.  The
 * principal itself, not a hash of it: a collision would end another's.
 * Written under the zone mutex; read without it, seq odd while written.
 */
#define NGX_PTY_REVOKED_MAX  64

typedef struct {
    ngx_atomic_t               seq;
    uint64_t                   at;        /* unix ms */
    size_t                     len;
    u_char                     principal[255];
} ngx_pty_revoked_t;


struct ngx_pty_shm_s {
    ngx_rbtree_t               rbtree;
    ngx_rbtree_node_t          sentinel;
    ngx_rbtree_t               names;
    ngx_rbtree_node_t          names_sentinel;
    ngx_queue_t                sessions;
    ngx_atomic_t               next_client;
    ngx_atomic_t               generation;    /* reloads into this zone */
    ngx_uint_t                 live;
    uint64_t                   nonce;     /* names this zone's doorbells */
    ngx_pty_worker_sh_t        workers[NGX_PTY_WORKERS_MAX];
    ngx_uint_t                 tomb_next;
    ngx_pty_tomb_t             tombs[NGX_PTY_TOMBS];
    u_char                     mcp_secret[32];  /* signs MCP session ids */
    ngx_uint_t                 archive;       /* pty_archive is on */
    ngx_atomic_t               arch_prune;    /* unix s of the next pruning */
    ngx_atomic_t               arch_failing;  /* hash of the fault, 0: none */
    ngx_atomic_t               arch_lagging;  /* a gap said, none since */
    ngx_atomic_t               revoked_next;  /* entries complete */
    ngx_pty_revoked_t          revoked[NGX_PTY_REVOKED_MAX];
};


typedef struct {
    ngx_slab_pool_t           *shpool;
    ngx_pty_shm_t             *sh;
} ngx_pty_zone_t;


/* what the zone holds, for the API's status call */
typedef struct {
    size_t                     size;        /* slab pages, bytes */
    size_t                     used;
    size_t                     sessions;    /* in the table */
    size_t                     running;     /* not closed yet */
    size_t                     ring;        /* frame ring data */
    size_t                     ring_used;
    size_t                     scroll;      /* scrollback data */
    size_t                     scroll_used;
    size_t                     inbox;
} ngx_pty_shm_stat_t;


ngx_int_t ngx_pty_shm_init_zone(ngx_shm_zone_t *shm_zone, void *data);
void ngx_pty_shm_stat(ngx_pty_shm_stat_t *st);
ngx_pty_zone_t *ngx_pty_shm_zone(void);

/*
 * An ended session as the archive keeps it, brought back into the zone
 * with the frames of its tail (ring records, oldest first).
 */
typedef struct {
    u_char                    *id;
    ngx_uint_t                 name;
    ngx_str_t                  command;
    ngx_str_t                  acl;
    ngx_uint_t                 cols;
    ngx_uint_t                 rows;
    time_t                     created;
    uint64_t                   closed_at;     /* unix ms */
    ngx_int_t                  exit_code;
    ngx_uint_t                 reason;
    u_char                    *frames;
    size_t                     frames_len;
    ngx_uint_t                 min_frames;    /* the ring's limits */
    size_t                     ring_size;
    size_t                     ring_max_size;
    ngx_pty_params_t          *params;        /* of the location asked */
    ngx_msec_t                 closed_linger;
} ngx_pty_shm_restore_t;

ngx_pty_session_sh_t *ngx_pty_shm_session_create(ngx_log_t *log,
    u_char *command, size_t len, ngx_str_t *acl, ngx_uint_t cols,
    ngx_uint_t rows, size_t scroll_size, size_t inbox_max);
ngx_pty_session_sh_t *ngx_pty_shm_session_restore(ngx_log_t *log,
    ngx_pty_shm_restore_t *rs, size_t scroll_size, ngx_uint_t *found);
ngx_pty_session_sh_t *ngx_pty_shm_session_find(ngx_str_t *id);
void ngx_pty_shm_session_retain(ngx_pty_session_sh_t *s);
void ngx_pty_shm_session_release(ngx_pty_session_sh_t *s);
void ngx_pty_shm_session_unlink(ngx_pty_session_sh_t *s);

/*
 * A session no longer in the table, by pty-N or UUID: NGX_OK with what
 * is left of it (of the last NGX_PTY_TOMBS forgotten); NGX_DECLINED:
 * none of those; NGX_ABORT: not a session id at all.
 */
ngx_int_t ngx_pty_shm_tomb_find(ngx_str_t *id, ngx_pty_tomb_t *tomb);

/*
 * Zone memory for a session, or for a new one (s NULL).  When the zone is
 * full, ended sessions give way: the reclaim handler (set by the session
 * layer) forgets the one that ended first, and the allocation is tried
 * again, until it succeeds or none is left.  For an ended session only
 * those that ended before it give way (its late joiners need a little).
 */
typedef ngx_uint_t (*ngx_pty_shm_reclaim_pt)(uint64_t ended_before);

void ngx_pty_shm_set_reclaim(ngx_pty_shm_reclaim_pt handler);
void *ngx_pty_shm_alloc(ngx_pty_session_sh_t *s, size_t size);
ngx_uint_t ngx_pty_shm_reclaim(ngx_pty_session_sh_t *s);

/*
 * The ended session that ended first leaves the table before its linger
 * is over.  NGX_DECLINED: there is none.  Otherwise *sh is NULL when it
 * was freed at once, or the record, retained, when views of it remain.
 */
ngx_int_t ngx_pty_shm_forget_oldest(ngx_pty_session_sh_t **sh,
    uint64_t ended_before);
/* gives a forgotten session's rings and inbox back to the zone */
void ngx_pty_shm_session_strip(ngx_pty_session_sh_t *s);
/* cuts an ended session's rings down to what a late reader gets */
void ngx_pty_shm_session_compact(ngx_pty_session_sh_t *s);

/*
 * The session spinlock holds its holder's pid: a worker killed while
 * holding it (SIGKILL, OOM) must not stall every other worker, so a
 * waiter that spun long checks the holder and takes the lock over from
 * a dead one.
 */
#define ngx_pty_shm_lock(s)    ngx_pty_shm_lock_recover(&(s)->lock)
#define ngx_pty_shm_unlock(s)  ngx_unlock(&(s)->lock)

void ngx_pty_shm_lock_recover(ngx_atomic_t *lock);
ngx_uint_t ngx_pty_pid_alive(ngx_pid_t pid);

/*
 * Appends a request for the owner; caller locks.  NGX_AGAIN: the inbox
 * must grow first (unlock, ngx_pty_inbox_grow(), try again); NGX_DECLINED:
 * it is at inbox_max and full.
 */
ngx_int_t ngx_pty_inbox_put(ngx_pty_session_sh_t *s, ngx_pty_inbox_t *rec,
    const u_char *data);
/* the same at the inbox's head: input a worker hands over at its exit */
ngx_int_t ngx_pty_inbox_unshift(ngx_pty_session_sh_t *s, ngx_pty_inbox_t *rec,
    const u_char *data);
/* caller holds no lock; NGX_ERROR: the zone is full */
ngx_int_t ngx_pty_inbox_grow(ngx_pty_session_sh_t *s, size_t need);
/* an inbox larger than this is given back once drained */
#define NGX_PTY_INBOX_KEEP  4096

ngx_pty_member_t *ngx_pty_shm_member_add(ngx_pty_session_sh_t *s,
    uint32_t client_id, ngx_uint_t role, u_char *label, size_t len);
void ngx_pty_shm_member_remove(ngx_pty_session_sh_t *s, ngx_pty_member_t *m);
uint32_t ngx_pty_shm_next_client_id(void);

/* ring: caller holds the session lock */
ngx_pty_frame_t *ngx_pty_ring_append(ngx_pty_session_sh_t *s,
    ngx_uint_t kind, uint32_t target, const u_char *data, size_t len);
void ngx_pty_ring_limits(ngx_pty_session_sh_t *s, ngx_uint_t min_frames,
    size_t grow_to, size_t max_size);
size_t ngx_pty_ring_reach(ngx_pty_ring_t *ring);
/* room for a frame of len and as many scrollback bytes; no lock held */
void ngx_pty_ring_reserve(ngx_pty_session_sh_t *s, size_t len,
    size_t scroll);
ngx_pty_frame_t *ngx_pty_ring_read(ngx_pty_ring_t *ring, uint64_t *off);
size_t ngx_pty_ring_need(size_t len);
uint64_t ngx_pty_ring_find(ngx_pty_ring_t *ring, uint64_t after_seq);
uint64_t ngx_pty_ring_first_seq(ngx_pty_ring_t *ring);

void ngx_pty_scroll_append(ngx_pty_scroll_t *sc, u_char *p, size_t len);
/* the oldest offset the scrollback still holds */
#define ngx_pty_scroll_tail(sc)                                               \
    ((sc)->head > (sc)->size ? (sc)->head - (sc)->size : 0)
size_t ngx_pty_scroll_read(ngx_pty_scroll_t *sc, uint64_t *off, u_char *buf,
    size_t max, uint64_t *missed);

/* pty-N: N is random in 1..NGX_PTY_NAME_MAX, unique in the zone */
#define NGX_PTY_NAME_MAX  999999

#define ngx_pty_frame_data(f)  ((u_char *) (f) + sizeof(ngx_pty_frame_t))


#endif /* _NGX_PTY_SHM_H_INCLUDED_ */
