
/*
 * The archive (pty_archive): every frame of every session in one SQLite
 * file, written behind the rings so that replay and transcripts outlive
 * the rings and nginx itself.  Nothing here runs SQLite on a worker's
 * event loop: a worker copies what its sessions' rings hold past their
 * archive cursors, under the session lock, and an nginx thread pool
 * stores the batch; reads run in the same pool and answer through a
 * handler on the event loop.  The master, which serves nobody, opens,
 * migrates and repairs the file at start and stores what is left at stop.
 */

#ifndef _NGX_PTY_STORE_H_INCLUDED_
#define _NGX_PTY_STORE_H_INCLUDED_


#include "ngx_pty.h"
#include "ngx_pty_shm.h"


#define NGX_PTY_STORE_SCHEMA  1


/* a pty_archive_key: AES-256-GCM, named in each row by its id */
typedef struct {
    u_char                     key[32];
    uint32_t                   id;           /* from its SHA-256 */
    ngx_str_t                  file;
} ngx_pty_store_key_t;


struct ngx_pty_store_conf_s {
    ngx_str_t                  path;         /* full name */
    ngx_str_t                  dir;
#if (NGX_THREADS)
    ngx_thread_pool_t         *pool;
#endif
    off_t                      max_size;     /* 0: no bound */
    time_t                     keep_closed;  /* seconds */
    ngx_msec_t                 batch;        /* a frame waits at most this */
    ngx_msec_t                 prune;        /* between prunings */
    ngx_array_t               *keys;         /* the first one writes */
};


/* a session as the archive knows it */
typedef struct {
    u_char                     id[NGX_PTY_ID_LEN];
    ngx_uint_t                 name;
    uint64_t                   started;      /* unix ms */
    uint64_t                   ended;        /* unix ms, 0: not ended */
    ngx_int_t                  exit_code;    /* -1: none */
    ngx_uint_t                 reason;       /* ngx_pty_closed_reason_e */
    ngx_uint_t                 cols;
    ngx_uint_t                 rows;
    uint64_t                   last_seq;     /* the newest stored */
    uint64_t                   first_seq;    /* the oldest kept */
    ngx_uint_t                 gaps;         /* ranges it could not store */
    ngx_str_t                  command;      /* ngx_alloc()ed */
    ngx_str_t                  acl;          /* ngx_alloc()ed */
} ngx_pty_store_session_t;


/*
 * A read: the session and its frames from sequence from on (or its tail),
 * at most limit, stored as ring records one after another (header, data,
 * padded as in the ring), and, when text is set, the settled text of all its
 * Output.  The handler runs on the event loop unless the read was
 * cancelled first; the store frees the read after it returns.
 */
typedef struct ngx_pty_store_read_s  ngx_pty_store_read_t;

typedef void (*ngx_pty_store_read_pt)(ngx_pty_store_read_t *rd);

struct ngx_pty_store_read_s {
    ngx_str_t                  key;          /* pty-N or UUID */
    uint64_t                   from;
    ngx_uint_t                 limit;
    ngx_uint_t                 text;
    ngx_uint_t                 tail;         /* from the last Keyframe for
                                                every client on, not from */
    ngx_uint_t                 list;         /* not one session: this many
                                                ended ones, newest first */
    size_t                     scroll;       /* not frames: this many bytes
                                                of its output from the
                                                scrollback offset from */

    ngx_int_t                  rc;           /* NGX_OK, NGX_DECLINED: no
                                                such session, NGX_ERROR */
    u_char                     err[160];
    ngx_pty_store_session_t    session;
    u_char                    *frames;
    size_t                     frames_len;
    ngx_uint_t                 nframes;
    uint64_t                   next;         /* 0: no frame after these;
                                                scroll: the offset of the
                                                output's first byte */
    ngx_str_t                  settled;
    ngx_pty_store_session_t   *sessions;     /* of a list */
    ngx_uint_t                 nsessions;

    ngx_pty_store_read_pt      handler;
    void                      *data;
    ngx_log_t                 *log;
    ngx_uint_t                 cancelled;
};


char *ngx_pty_store_directive(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_pty_store_key_directive(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
ngx_int_t ngx_pty_store_init_module(ngx_cycle_t *cycle);
ngx_int_t ngx_pty_store_init_process(ngx_cycle_t *cycle);
void ngx_pty_store_exit_process(ngx_cycle_t *cycle);
/* nginx stops: the master stores what the workers left (blocking) */
void ngx_pty_store_exit_master(ngx_cycle_t *cycle);

ngx_uint_t ngx_pty_store_enabled(void);
/* a session has new frames: they are stored within the batch time */
void ngx_pty_store_note(ngx_pty_session_sh_t *sh);

/* an archived session as a record the auth check reads (id, name, ACL) */
static ngx_inline void
ngx_pty_store_as_record(ngx_pty_session_sh_t *sh, ngx_pty_store_session_t *m)
{
    ngx_memzero(sh, sizeof(ngx_pty_session_sh_t));
    ngx_memcpy(sh->id, m->id, NGX_PTY_ID_LEN);
    sh->name = m->name;
    sh->acl = m->acl.data;
    sh->acl_len = m->acl.len;
    sh->state = NGX_PTY_STATE_CLOSED;
}

/* NULL: out of memory; the caller sets key, from, limit, handler */
ngx_pty_store_read_t *ngx_pty_store_read_create(ngx_log_t *log);
/* NGX_OK: the handler will run; NGX_ERROR: it will not, free it */
ngx_int_t ngx_pty_store_read_post(ngx_pty_store_read_t *rd);
void ngx_pty_store_read_free(ngx_pty_store_read_t *rd);


#endif /* _NGX_PTY_STORE_H_INCLUDED_ */
