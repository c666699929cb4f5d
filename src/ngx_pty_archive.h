
/*
 * The archive: every session's frames and metadata in one SQLite file
 * (pty_archive), for replay older than the ring, transcripts after a
 * restart, and agent reads that fell behind the scrollback.
 *
 * One process writes it, the archive writer (ngx_pty_archiver.c), forked
 * by the master like the spawner: it follows each session's ring through
 * its own cursor in the zone (ring->archived), so a slow disk never
 * delays a terminal.  Workers only read it, in a thread pool, never on
 * their event loop.  Schema and choices: docs/ARCHITECTURE.md, "Archive".
 */

#ifndef _NGX_PTY_ARCHIVE_H_INCLUDED_
#define _NGX_PTY_ARCHIVE_H_INCLUDED_


#include "ngx_pty.h"
#include "ngx_pty_shm.h"


/* the directive pty_archive: off | on | path [threads=pool] */
char *ngx_pty_archive_set(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_pty_archive_init_conf(ngx_conf_t *cf, ngx_pty_main_conf_t *pmcf);

/* in the master at each configuration: checks, forks or keeps the writer */
ngx_int_t ngx_pty_archive_init_module(ngx_cycle_t *cycle);
/* in a worker */
ngx_int_t ngx_pty_archive_init_process(ngx_cycle_t *cycle);
/* in any process the master forks: only the master holds the writer's line */
void ngx_pty_archive_forked(void);

/* frames were appended: the writer hears of it (coalesced) */
void ngx_pty_archive_wake(void);

/* configured, and readable from this worker */
ngx_uint_t ngx_pty_archive_on(void);


/* what the archive knows of a session */
typedef struct {
    u_char                     id[NGX_PTY_ID_LEN];
    ngx_uint_t                 name;
    uint64_t                   started;       /* unix ms */
    uint64_t                   ended;         /* 0: not ended */
    ngx_int_t                  exit_code;     /* -1: none */
    ngx_str_t                  reason;        /* "" while live */
    ngx_str_t                  command;
    ngx_str_t                  principal;
    ngx_str_t                  acl;           /* as in the zone record */
    ngx_uint_t                 cols;
    ngx_uint_t                 rows;
    uint64_t                   first_seq;     /* 0: no frame kept */
    uint64_t                   last_seq;
} ngx_pty_archive_meta_t;


typedef enum {
    NGX_PTY_ARCHIVE_FRAMES = 0,   /* frames from seq `from` on */
    NGX_PTY_ARCHIVE_BYTES,        /* Output from scrollback offset `from` */
    NGX_PTY_ARCHIVE_SESSION,      /* a session's metadata */
    NGX_PTY_ARCHIVE_LIST          /* sessions, newest first */
} ngx_pty_archive_op_e;


typedef struct ngx_pty_archive_read_s  ngx_pty_archive_read_t;

typedef void (*ngx_pty_archive_done_pt)(ngx_pty_archive_read_t *rd);

/*
 * One read, done in a thread of the pool.  The caller fills the request,
 * posts it, and gets its handler called on the event loop; a caller that
 * goes first sets data to NULL and the read frees itself when done.
 */
struct ngx_pty_archive_read_s {
    /* the request */
    ngx_uint_t                 op;
    u_char                     id[NGX_PTY_ID_LEN];   /* or by name: */
    ngx_uint_t                 name;
    uint64_t                   from;
    uint64_t                   to;            /* 0: no bound */
    size_t                     max;           /* bytes of records */
    ngx_uint_t                 rows;          /* frames at most; 0: 4096 */

    /*
     * The answer.  rc: NGX_OK, NGX_DECLINED (the archive does not have
     * the session), NGX_ERROR (it could not be read: logged).  Frames:
     * records as in the ring (ngx_pty_frame_t, data, padded to 8), from
     * the first stored at or after `from`; more: some did not fit.
     * Bytes: the Output bytes from offset `from` (or the oldest kept),
     * at = the offset of the first.  A list: metas.
     */
    ngx_int_t                  rc;
    ngx_pty_archive_meta_t     meta;
    u_char                    *buf;
    size_t                     len;
    size_t                     size;
    ngx_uint_t                 more;
    uint64_t                   at;
    ngx_array_t               *metas;         /* LIST: the caller's pool */

    ngx_pty_archive_done_pt    handler;
    void                      *data;
    ngx_log_t                 *log;

    /* private */
    ngx_pool_t                *pool;
    void                      *task;          /* ngx_thread_task_t */
    ngx_uint_t                 busy;          /* the thread has it */
    u_char                     errmsg[128];
    ngx_int_t                  errcode;
};


/* a read to fill in, its answer's memory in its own pool */
ngx_pty_archive_read_t *ngx_pty_archive_read_new(ngx_log_t *log);
ngx_int_t ngx_pty_archive_read_post(ngx_pty_archive_read_t *rd);
/* called by the caller's handler, or by whoever gives up (data = NULL) */
void ngx_pty_archive_read_free(ngx_pty_archive_read_t *rd);

/* next record of a FRAMES answer; NULL at the end */
ngx_pty_frame_t *ngx_pty_archive_next(ngx_pty_archive_read_t *rd,
    size_t *pos);

/* the schema version this code writes (PRAGMA user_version) */
#define NGX_PTY_ARCHIVE_SCHEMA  1


#endif /* _NGX_PTY_ARCHIVE_H_INCLUDED_ */
