
/*
 * The archive: its directives, the master's part (the check nginx -t
 * makes, forking or keeping the writer), and the workers' part: waking
 * the writer, and reads done in a thread pool.
 */

#include "ngx_pty.h"
#include "ngx_pty_shm.h"
#include "ngx_pty_archive.h"
#include "ngx_pty_archiver.h"

#include <sqlite3.h>
#include <grp.h>

#if (NGX_THREADS)
#include <ngx_thread_pool.h>
#endif


#define NGX_PTY_ARCHIVE_DEFAULT  "pty_archive.db"
#define NGX_PTY_ARCHIVE_ROWS     4096     /* frames a read at most */


/* the master's: the writer, kept across reloads while its conf holds */
static ngx_pty_archiver_conf_t  *ngx_pty_archive_conf;
static ngx_pid_t                 ngx_pty_archive_writer = NGX_INVALID_PID;
static int                       ngx_pty_archive_ctl = -1;

/* a worker's */
static ngx_socket_t              ngx_pty_archive_fd = (ngx_socket_t) -1;
static struct sockaddr_un        ngx_pty_archive_sa;
static socklen_t                 ngx_pty_archive_salen;
static u_char                   *ngx_pty_archive_path;
#if (NGX_THREADS)
static ngx_thread_pool_t        *ngx_pty_archive_pool;
#endif


static ngx_int_t ngx_pty_archive_check(ngx_cycle_t *cycle,
    ngx_pty_main_conf_t *pmcf, ngx_core_conf_t *ccf);
static ngx_int_t ngx_pty_archive_writable(ngx_cycle_t *cycle, u_char *path,
    ngx_core_conf_t *ccf, int mode);
static ngx_pty_archiver_conf_t *ngx_pty_archive_conf_make(ngx_cycle_t *cycle,
    ngx_pty_main_conf_t *pmcf, ngx_core_conf_t *ccf);
static ngx_uint_t ngx_pty_archive_conf_same(ngx_pty_archiver_conf_t *a,
    ngx_pty_archiver_conf_t *b);
static void ngx_pty_archive_conf_free(ngx_pty_archiver_conf_t *cf);
static void ngx_pty_archive_stop(void);
#if (NGX_THREADS)
static void ngx_pty_archive_thread(void *data, ngx_log_t *log);
static void ngx_pty_archive_done(ngx_event_t *ev);
static sqlite3 *ngx_pty_archive_db(ngx_pty_archive_read_t *rd);
static ngx_int_t ngx_pty_archive_meta(ngx_pty_archive_read_t *rd,
    sqlite3 *db, int64_t *sid);
static void ngx_pty_archive_meta_row(ngx_pty_archive_read_t *rd,
    sqlite3_stmt *st, ngx_pty_archive_meta_t *m);
static ngx_int_t ngx_pty_archive_frames(ngx_pty_archive_read_t *rd,
    sqlite3 *db, int64_t sid);
static ngx_int_t ngx_pty_archive_bytes(ngx_pty_archive_read_t *rd,
    sqlite3 *db, int64_t sid);
static ngx_int_t ngx_pty_archive_list(ngx_pty_archive_read_t *rd,
    sqlite3 *db);
static u_char *ngx_pty_archive_room(ngx_pty_archive_read_t *rd, size_t n);
static void ngx_pty_archive_error(ngx_pty_archive_read_t *rd, sqlite3 *db,
    const char *what);
#endif


/* ---- configuration ---- */


char *
ngx_pty_archive_set(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_pty_main_conf_t  *pmcf = conf;

    ngx_str_t   *value, name;
    ngx_uint_t   i;

    if (pmcf->archive.data) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_strcmp(value[1].data, "off") == 0) {
        ngx_str_set(&pmcf->archive, "");
        return NGX_CONF_OK;
    }

    name = value[1];

    if (ngx_strcmp(name.data, "on") == 0) {
        ngx_str_set(&name, NGX_PTY_ARCHIVE_DEFAULT);
    }

    if (ngx_conf_full_name(cf->cycle, &name, 0) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    pmcf->archive = name;

    for (i = 2; i < cf->args->nelts; i++) {
        if (ngx_strncmp(value[i].data, "threads=", 8) == 0
            && value[i].len > 8)
        {
            pmcf->archive_threads.data = value[i].data + 8;
            pmcf->archive_threads.len = value[i].len - 8;
            continue;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid parameter \"%V\"",
                           &value[i]);
        return NGX_CONF_ERROR;
    }

#if (NGX_THREADS)
    {
        ngx_str_t  *pool = pmcf->archive_threads.len ? &pmcf->archive_threads
                                                     : NULL;

        /* no name: nginx's "default" pool, made if nobody declared it */
        pmcf->archive_pool = ngx_thread_pool_add(cf, pool);
        if (pmcf->archive_pool == NULL) {
            return NGX_CONF_ERROR;
        }

        if (pool == NULL) {
            ngx_str_set(&pmcf->archive_threads, "default");
        }
    }

    return NGX_CONF_OK;
#else
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "\"pty_archive\" needs nginx built with --with-threads "
                       "(the archive is read in a thread pool)");
    return NGX_CONF_ERROR;
#endif
}


char *
ngx_pty_archive_init_conf(ngx_conf_t *cf, ngx_pty_main_conf_t *pmcf)
{
    if (pmcf->archive.data == NULL) {
        ngx_str_set(&pmcf->archive, "");
    }

    ngx_conf_init_msec_value(pmcf->archive_retention,
                             7 * 24 * 3600 * 1000);
    ngx_conf_init_msec_value(pmcf->archive_prune, 60000);

    if (pmcf->archive_max_size == NGX_CONF_UNSET) {
        pmcf->archive_max_size = (off_t) 1024 * 1024 * 1024;
    }

    return NGX_CONF_OK;
}


/* ---- the master ---- */


ngx_int_t
ngx_pty_archive_init_module(ngx_cycle_t *cycle)
{
    ngx_core_conf_t          *ccf;
    ngx_pty_main_conf_t      *pmcf;
    ngx_pty_archiver_conf_t  *cf;

    pmcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_pty_module);
    ccf = (ngx_core_conf_t *) ngx_get_conf(cycle->conf_ctx, ngx_core_module);

    if (pmcf == NULL || pmcf->shm_zone == NULL || pmcf->archive.len == 0) {
        if (!ngx_test_config && ngx_process != NGX_PROCESS_SIGNALLER) {
            ngx_pty_archive_stop();
        }

        return NGX_OK;
    }

    if (ngx_pty_archive_check(cycle, pmcf, ccf) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_test_config || ngx_process == NGX_PROCESS_SIGNALLER) {
        return NGX_OK;
    }

    cf = ngx_pty_archive_conf_make(cycle, pmcf, ccf);
    if (cf == NULL) {
        return NGX_ERROR;
    }

    if (ngx_pty_archive_writer != NGX_INVALID_PID
        && ngx_pty_archive_conf_same(cf, ngx_pty_archive_conf)
        && kill(ngx_pty_archive_writer, 0) == 0)
    {
        /* the same file and settings: the same writer */
        ngx_pty_archive_conf_free(cf);
        return NGX_OK;
    }

    /* the old one stores what it took and goes; the new one waits for it */
    ngx_pty_archive_stop();

    ngx_pty_archive_writer = ngx_pty_archiver_fork(cycle, cf,
                                                   &ngx_pty_archive_ctl);

    if (ngx_pty_archive_writer == NGX_INVALID_PID) {
        ngx_pty_archive_conf_free(cf);
        return NGX_ERROR;
    }

    ngx_pty_archive_conf = cf;

    return NGX_OK;
}


static void
ngx_pty_archive_stop(void)
{
    if (ngx_pty_archive_ctl != -1) {
        (void) send(ngx_pty_archive_ctl, "s", 1, MSG_DONTWAIT);
        close(ngx_pty_archive_ctl);
        ngx_pty_archive_ctl = -1;
    }

    ngx_pty_archive_writer = NGX_INVALID_PID;

    if (ngx_pty_archive_conf) {
        ngx_pty_archive_conf_free(ngx_pty_archive_conf);
        ngx_pty_archive_conf = NULL;
    }
}


/*
 * What nginx -t says: the database's directory must exist and the
 * workers' user must be able to make files in it (the WAL and its index
 * live beside the database), and the file, if there, must be theirs to
 * write.  Checked by mode bits against the workers' uid and groups.
 */
static ngx_int_t
ngx_pty_archive_check(ngx_cycle_t *cycle, ngx_pty_main_conf_t *pmcf,
    ngx_core_conf_t *ccf)
{
    u_char           *p, *dir;
    ngx_file_info_t   fi;

    dir = ngx_pnalloc(cycle->pool, pmcf->archive.len + 1);
    if (dir == NULL) {
        return NGX_ERROR;
    }

    p = ngx_cpymem(dir, pmcf->archive.data, pmcf->archive.len);
    *p = '\0';

    while (p > dir && *p != '/') {
        p--;
    }

    *(p == dir ? p + 1 : p) = '\0';

    if (ngx_file_info(dir, &fi) == NGX_FILE_ERROR || !ngx_is_dir(&fi)) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_errno,
                      "pty: the directory \"%s\" of \"pty_archive\" %V is "
                      "not there", dir, &pmcf->archive);
        return NGX_ERROR;
    }

    if (ngx_pty_archive_writable(cycle, dir, ccf, 3) != NGX_OK) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "pty: the directory \"%s\" of \"pty_archive\" is not "
                      "writable by the workers' user \"%s\": the archive "
                      "makes its files there", dir,
                      ccf->username ? ccf->username : "(nginx's)");
        return NGX_ERROR;
    }

    if (ngx_file_info(pmcf->archive.data, &fi) != NGX_FILE_ERROR
        && ngx_pty_archive_writable(cycle, pmcf->archive.data, ccf, 6)
           != NGX_OK)
    {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "pty: \"pty_archive\" %V is not readable and "
                      "writable by the workers' user \"%s\"",
                      &pmcf->archive,
                      ccf->username ? ccf->username : "(nginx's)");
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* mode: 3 (write and search, a directory) or 6 (read and write) */
static ngx_int_t
ngx_pty_archive_writable(ngx_cycle_t *cycle, u_char *path,
    ngx_core_conf_t *ccf, int mode)
{
    int              i, n;
    gid_t            groups[64];
    ngx_uint_t       shift;
    ngx_file_info_t  fi;

    if (geteuid() != 0 || !ccf->master) {
        /* the workers are this process's user */
        return access((char *) path, mode == 3 ? W_OK|X_OK : R_OK|W_OK) == 0
               ? NGX_OK : NGX_ERROR;
    }

    if (ccf->user == 0) {
        return NGX_OK;
    }

    if (ngx_file_info(path, &fi) == NGX_FILE_ERROR) {
        return NGX_ERROR;
    }

    shift = 0;

    if (fi.st_uid == ccf->user) {
        shift = 6;

    } else {
        n = 64;
        groups[0] = ccf->group;

        if (ccf->username == NULL
            || getgrouplist(ccf->username, ccf->group, groups, &n) == -1)
        {
            n = 1;
        }

        for (i = 0; i < n; i++) {
            if (groups[i] == fi.st_gid) {
                shift = 3;
                break;
            }
        }
    }

    return ((fi.st_mode >> shift) & mode) == (ngx_uint_t) mode
           ? NGX_OK : NGX_ERROR;
}


/* the writer's settings, in memory that outlives the cycle */
static ngx_pty_archiver_conf_t *
ngx_pty_archive_conf_make(ngx_cycle_t *cycle, ngx_pty_main_conf_t *pmcf,
    ngx_core_conf_t *ccf)
{
    size_t                    ulen;
    ngx_pty_archiver_conf_t  *cf;

    ulen = ccf->username ? ngx_strlen(ccf->username) + 1 : 0;

    cf = ngx_calloc(sizeof(ngx_pty_archiver_conf_t) + pmcf->archive.len + 1
                    + ulen, cycle->log);
    if (cf == NULL) {
        return NULL;
    }

    cf->path = (u_char *) (cf + 1);
    cf->path_len = pmcf->archive.len;
    ngx_memcpy(cf->path, pmcf->archive.data, pmcf->archive.len);

    if (ulen) {
        cf->user = cf->path + pmcf->archive.len + 1;
        ngx_memcpy(cf->user, ccf->username, ulen);
    }

    cf->retention = pmcf->archive_retention;
    cf->max_size = pmcf->archive_max_size;
    cf->prune = pmcf->archive_prune;
    cf->uid = (geteuid() == 0 && ccf->master) ? ccf->user : geteuid();
    cf->gid = (geteuid() == 0 && ccf->master) ? ccf->group : getegid();

    return cf;
}


static ngx_uint_t
ngx_pty_archive_conf_same(ngx_pty_archiver_conf_t *a,
    ngx_pty_archiver_conf_t *b)
{
    return b && a->path_len == b->path_len
           && ngx_strcmp(a->path, b->path) == 0
           && a->retention == b->retention && a->max_size == b->max_size
           && a->prune == b->prune && a->uid == b->uid && a->gid == b->gid;
}


static void
ngx_pty_archive_conf_free(ngx_pty_archiver_conf_t *cf)
{
    ngx_free(cf);
}


/* ---- a worker ---- */


/* in every process the master forks: its line to the writer is its own */
void
ngx_pty_archive_forked(void)
{
    if (ngx_pty_archive_ctl != -1) {
        close(ngx_pty_archive_ctl);
        ngx_pty_archive_ctl = -1;
    }
}


ngx_int_t
ngx_pty_archive_init_process(ngx_cycle_t *cycle)
{
    ngx_pty_main_conf_t  *pmcf;

    pmcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_pty_module);

    if (pmcf == NULL || pmcf->shm_zone == NULL || pmcf->archive.len == 0) {
        return NGX_OK;
    }

    ngx_pty_archive_path = pmcf->archive.data;

#if (NGX_THREADS)
    ngx_pty_archive_pool = pmcf->archive_pool;
#endif

    ngx_pty_archive_fd = socket(AF_UNIX,
                                SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (ngx_pty_archive_fd == (ngx_socket_t) -1) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, ngx_socket_errno,
                      "pty: socket() for the archive's wake-ups failed");
        return NGX_OK;
    }

    ngx_pty_archive_salen = ngx_pty_archiver_address(&ngx_pty_archive_sa);

    return NGX_OK;
}


ngx_uint_t
ngx_pty_archive_on(void)
{
    return ngx_pty_archive_path != NULL;
}


/*
 * After appends: one datagram while none is on its way (the writer
 * clears archive_rung before it looks).  A writer that is gone stops the
 * rings from keeping frames for it.
 */
void
ngx_pty_archive_wake(void)
{
    ngx_err_t        err;
    ngx_pid_t        pid;
    ngx_pty_shm_t   *zsh;

    if (ngx_pty_archive_fd == (ngx_socket_t) -1) {
        return;
    }

    zsh = ngx_pty_shm_zone()->sh;

    if (zsh->archiver == 0 || zsh->archive_rung
        || !ngx_atomic_cmp_set(&zsh->archive_rung, 0, 1))
    {
        return;
    }

    if (sendto(ngx_pty_archive_fd, "w", 1, 0,
               (struct sockaddr *) &ngx_pty_archive_sa,
               ngx_pty_archive_salen)
        != -1)
    {
        return;
    }

    err = ngx_socket_errno;

    if (err == NGX_EAGAIN) {
        return;
    }

    pid = (ngx_pid_t) zsh->archiver;

    if (err == NGX_ECONNREFUSED && !ngx_pty_pid_alive(pid)
        && ngx_atomic_cmp_set(&zsh->archiver, pid, 0))
    {
        /* it died: rings evict as without it; the next one says so */
        zsh->archive_ok = 0;
        ngx_log_error(NGX_LOG_ALERT, ngx_cycle->log, 0,
                      "pty: the archive writer %P is gone; sessions are "
                      "not archived until nginx is reloaded", pid);
        return;
    }

    zsh->archive_rung = 0;
}


/* ---- reads, in a thread ---- */


ngx_pty_archive_read_t *
ngx_pty_archive_read_new(ngx_log_t *log)
{
    ngx_pool_t              *pool;
    ngx_pty_archive_read_t  *rd;

    pool = ngx_create_pool(4096, log);
    if (pool == NULL) {
        return NULL;
    }

    rd = ngx_pcalloc(pool, sizeof(ngx_pty_archive_read_t));
    if (rd == NULL) {
        ngx_destroy_pool(pool);
        return NULL;
    }

    rd->pool = pool;
    rd->log = log;
    rd->max = 256 * 1024;
    rd->meta.exit_code = -1;

    return rd;
}


void
ngx_pty_archive_read_free(ngx_pty_archive_read_t *rd)
{
    if (rd->busy) {
        /* the thread still has it: freed when it is done */
        rd->data = NULL;
        return;
    }

    if (rd->buf) {
        ngx_free(rd->buf);
    }

    ngx_destroy_pool(rd->pool);
}


ngx_int_t
ngx_pty_archive_read_post(ngx_pty_archive_read_t *rd)
{
#if (NGX_THREADS)
    ngx_thread_task_t  *task;

    if (ngx_pty_archive_pool == NULL) {
        return NGX_DECLINED;
    }

    task = rd->task;

    if (task == NULL) {
        task = ngx_pcalloc(rd->pool, sizeof(ngx_thread_task_t));
        if (task == NULL) {
            return NGX_ERROR;
        }

        rd->task = task;
    }

    task->ctx = rd;
    task->handler = ngx_pty_archive_thread;
    task->event.data = rd;
    task->event.handler = ngx_pty_archive_done;
    task->event.log = rd->log;

    rd->rc = NGX_ERROR;
    rd->len = 0;
    rd->more = 0;
    rd->errmsg[0] = '\0';

    if (ngx_thread_task_post(ngx_pty_archive_pool, task) != NGX_OK) {
        return NGX_ERROR;
    }

    rd->busy = 1;

    return NGX_OK;
#else
    return NGX_DECLINED;
#endif
}


ngx_pty_frame_t *
ngx_pty_archive_next(ngx_pty_archive_read_t *rd, size_t *pos)
{
    ngx_pty_frame_t  *f;

    if (*pos + sizeof(ngx_pty_frame_t) > rd->len) {
        return NULL;
    }

    f = (ngx_pty_frame_t *) (rd->buf + *pos);
    *pos += ngx_align(sizeof(ngx_pty_frame_t) + f->len, 8);

    return f;
}


#if (NGX_THREADS)

/* each thread of the pool keeps its own connection, read-only in use */
static __thread sqlite3  *ngx_pty_archive_rdb;


static void
ngx_pty_archive_thread(void *data, ngx_log_t *log)
{
    int64_t                  sid;
    sqlite3                 *db;
    ngx_pty_archive_read_t  *rd = data;

    db = ngx_pty_archive_db(rd);
    if (db == NULL) {
        return;
    }

    /* one snapshot for the session and its frames */
    if (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
        ngx_pty_archive_error(rd, db, "begin");
        return;
    }

    if (rd->op == NGX_PTY_ARCHIVE_LIST) {
        rd->rc = ngx_pty_archive_list(rd, db);

    } else {
        rd->rc = ngx_pty_archive_meta(rd, db, &sid);

        if (rd->rc == NGX_OK && rd->op == NGX_PTY_ARCHIVE_FRAMES) {
            rd->rc = ngx_pty_archive_frames(rd, db, sid);

        } else if (rd->rc == NGX_OK && rd->op == NGX_PTY_ARCHIVE_BYTES) {
            rd->rc = ngx_pty_archive_bytes(rd, db, sid);
        }
    }

    (void) sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
}


static sqlite3 *
ngx_pty_archive_db(ngx_pty_archive_read_t *rd)
{
    sqlite3  *db;

    if (ngx_pty_archive_rdb) {
        return ngx_pty_archive_rdb;
    }

    /* no CREATE: the writer makes it; read-write for the WAL's index */
    if (sqlite3_open_v2((char *) ngx_pty_archive_path, &db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL)
        != SQLITE_OK)
    {
        ngx_pty_archive_error(rd, db, "open");
        (void) sqlite3_close_v2(db);
        return NULL;
    }

    (void) sqlite3_busy_timeout(db, 1000);
    (void) sqlite3_exec(db, "PRAGMA query_only = 1", NULL, NULL, NULL);

    ngx_pty_archive_rdb = db;

    return db;
}


static void
ngx_pty_archive_error(ngx_pty_archive_read_t *rd, sqlite3 *db,
    const char *what)
{
    int  code;

    code = db ? sqlite3_extended_errcode(db) : SQLITE_NOMEM;

    ngx_snprintf(rd->errmsg, sizeof(rd->errmsg) - 1, "%s: %s (%d)%Z", what,
                 db ? sqlite3_errmsg(db) : "out of memory", code);

    rd->errcode = code;
    rd->rc = NGX_ERROR;

    if (db && ((code & 0xff) == SQLITE_CORRUPT
               || (code & 0xff) == SQLITE_NOTADB
               || (code & 0xff) == SQLITE_CANTOPEN))
    {
        /* the writer may put a new file there: open again next time */
        if (db == ngx_pty_archive_rdb) {
            (void) sqlite3_close_v2(db);
            ngx_pty_archive_rdb = NULL;
        }
    }
}


#define NGX_PTY_ARCHIVE_META_COLS                                             \
    "s.sid, s.uuid, s.name, s.started, s.ended, s.exit_code, s.reason,"     \
    " s.command, s.principal, s.acl, s.cols, s.rows, s.last_seq,"            \
    " (SELECT min(seq) FROM frames f WHERE f.sid = s.sid)"


/* the session, by id or by name (the newest of that name) */
static ngx_int_t
ngx_pty_archive_meta(ngx_pty_archive_read_t *rd, sqlite3 *db, int64_t *sid)
{
    int            rc;
    sqlite3_stmt  *st;

    rc = sqlite3_prepare_v2(db, rd->name
                     ? "SELECT " NGX_PTY_ARCHIVE_META_COLS " FROM sessions s"
                       " WHERE s.name = ?2 ORDER BY s.started DESC LIMIT 1"
                     : "SELECT " NGX_PTY_ARCHIVE_META_COLS " FROM sessions s"
                       " WHERE s.uuid = ?1", -1, &st, NULL);

    if (rc != SQLITE_OK) {
        ngx_pty_archive_error(rd, db, "prepare");
        return NGX_ERROR;
    }

    if (rd->name) {
        (void) sqlite3_bind_int64(st, 2, (int64_t) rd->name);

    } else {
        (void) sqlite3_bind_text(st, 1, (char *) rd->id, NGX_PTY_ID_LEN,
                                 SQLITE_STATIC);
    }

    rc = sqlite3_step(st);

    if (rc == SQLITE_ROW) {
        *sid = sqlite3_column_int64(st, 0);
        ngx_pty_archive_meta_row(rd, st, &rd->meta);
        (void) sqlite3_finalize(st);
        return NGX_OK;
    }

    if (rc != SQLITE_DONE) {
        ngx_pty_archive_error(rd, db, "session");
    }

    (void) sqlite3_finalize(st);

    return rc == SQLITE_DONE ? NGX_DECLINED : NGX_ERROR;
}


static ngx_str_t
ngx_pty_archive_text(ngx_pty_archive_read_t *rd, sqlite3_stmt *st, int col)
{
    ngx_str_t    s;
    const void  *p;

    p = sqlite3_column_blob(st, col);
    s.len = (size_t) sqlite3_column_bytes(st, col);
    s.data = ngx_pnalloc(rd->pool, s.len + 1);

    if (s.data == NULL) {
        s.len = 0;
        s.data = (u_char *) "";
        return s;
    }

    if (s.len) {
        ngx_memcpy(s.data, p, s.len);
    }

    s.data[s.len] = '\0';

    return s;
}


static void
ngx_pty_archive_meta_row(ngx_pty_archive_read_t *rd, sqlite3_stmt *st,
    ngx_pty_archive_meta_t *m)
{
    ngx_str_t  id;

    id = ngx_pty_archive_text(rd, st, 1);
    ngx_memcpy(m->id, id.data, ngx_min(id.len, NGX_PTY_ID_LEN));

    m->name = (ngx_uint_t) sqlite3_column_int64(st, 2);
    m->started = (uint64_t) sqlite3_column_int64(st, 3);
    m->ended = (uint64_t) sqlite3_column_int64(st, 4);
    m->exit_code = sqlite3_column_type(st, 5) == SQLITE_NULL
                   ? -1 : (ngx_int_t) sqlite3_column_int64(st, 5);
    m->reason = ngx_pty_archive_text(rd, st, 6);
    m->command = ngx_pty_archive_text(rd, st, 7);
    m->principal = ngx_pty_archive_text(rd, st, 8);
    m->acl = ngx_pty_archive_text(rd, st, 9);
    m->cols = (ngx_uint_t) sqlite3_column_int64(st, 10);
    m->rows = (ngx_uint_t) sqlite3_column_int64(st, 11);
    m->last_seq = (uint64_t) sqlite3_column_int64(st, 12);
    m->first_seq = (uint64_t) sqlite3_column_int64(st, 13);
}


/* records from seq rd->from on, as the ring holds them, up to rd->max */
static ngx_int_t
ngx_pty_archive_frames(ngx_pty_archive_read_t *rd, sqlite3 *db, int64_t sid)
{
    int               rc;
    u_char           *p;
    size_t            len;
    ngx_uint_t        n, rows;
    sqlite3_stmt     *st;
    ngx_pty_frame_t  *f;

    rc = sqlite3_prepare_v2(db, "SELECT seq, ts, kind, target, anchor, cols,"
                            " rows, offset, id, data FROM frames"
                            " WHERE sid = ?1 AND seq >= ?2 AND seq <= ?3"
                            " ORDER BY seq LIMIT ?4", -1, &st, NULL);
    if (rc != SQLITE_OK) {
        ngx_pty_archive_error(rd, db, "prepare");
        return NGX_ERROR;
    }

    (void) sqlite3_bind_int64(st, 1, sid);
    (void) sqlite3_bind_int64(st, 2, (int64_t) rd->from);
    (void) sqlite3_bind_int64(st, 3, rd->to ? (int64_t) rd->to : INT64_MAX);
    rows = rd->rows ? rd->rows : NGX_PTY_ARCHIVE_ROWS;
    (void) sqlite3_bind_int64(st, 4, (int64_t) rows + 1);

    n = 0;

    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        len = (size_t) sqlite3_column_bytes(st, 9);

        if (++n > rows || (rd->len && rd->len + len > rd->max))
        {
            rd->more = 1;
            break;
        }

        p = ngx_pty_archive_room(rd, ngx_align(sizeof(ngx_pty_frame_t) + len,
                                               8));
        if (p == NULL) {
            rd->more = 1;
            break;
        }

        f = (ngx_pty_frame_t *) p;
        ngx_memzero(f, sizeof(ngx_pty_frame_t));
        f->seq = (uint64_t) sqlite3_column_int64(st, 0);
        f->ts = (uint64_t) sqlite3_column_int64(st, 1);
        f->kind = (uint16_t) sqlite3_column_int(st, 2);
        f->target = (uint32_t) sqlite3_column_int64(st, 3);
        f->anchor = (uint64_t) sqlite3_column_int64(st, 4);
        f->cols = (uint16_t) sqlite3_column_int(st, 5);
        f->rows = (uint16_t) sqlite3_column_int(st, 6);
        f->offset = (uint64_t) sqlite3_column_int64(st, 7);
        f->len = (uint32_t) len;

        if (sqlite3_column_bytes(st, 8) == 16) {
            ngx_memcpy(f->id, sqlite3_column_blob(st, 8), 16);
        }

        if (len) {
            ngx_memcpy(ngx_pty_frame_data(f), sqlite3_column_blob(st, 9),
                       len);
        }
    }

    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        ngx_pty_archive_error(rd, db, "frames");
        (void) sqlite3_finalize(st);
        return NGX_ERROR;
    }

    (void) sqlite3_finalize(st);

    return NGX_OK;
}


/* Output bytes from scrollback offset rd->from, up to rd->max */
static ngx_int_t
ngx_pty_archive_bytes(ngx_pty_archive_read_t *rd, sqlite3 *db, int64_t sid)
{
    int            rc;
    u_char        *p;
    size_t         len, skip;
    uint64_t       off;
    sqlite3_stmt  *st;

    rc = sqlite3_prepare_v2(db, "SELECT offset, data FROM frames"
                            " WHERE sid = ?1 AND kind = ?2"
                            " AND offset + length(data) > ?3"
                            " ORDER BY seq LIMIT ?4", -1, &st, NULL);
    if (rc != SQLITE_OK) {
        ngx_pty_archive_error(rd, db, "prepare");
        return NGX_ERROR;
    }

    (void) sqlite3_bind_int64(st, 1, sid);
    (void) sqlite3_bind_int(st, 2, NGX_PTY_FRAME_OUTPUT);
    (void) sqlite3_bind_int64(st, 3, (int64_t) rd->from);
    (void) sqlite3_bind_int(st, 4, NGX_PTY_ARCHIVE_ROWS);

    rd->at = rd->from;

    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        off = (uint64_t) sqlite3_column_int64(st, 0);
        len = (size_t) sqlite3_column_bytes(st, 1);

        if (rd->len == 0) {
            /* what was pruned or never stored is skipped */
            rd->at = ngx_max(off, rd->from);

        } else if (off != rd->at + rd->len) {
            break;          /* a gap: the caller asks again from there */
        }

        skip = (rd->len == 0 && off < rd->from) ? rd->from - off : 0;
        len -= skip;

        if (rd->len + len > rd->max) {
            rd->more = 1;
            len = rd->max - rd->len;
        }

        p = ngx_pty_archive_room(rd, len);
        if (p == NULL) {
            break;
        }

        ngx_memcpy(p, (u_char *) sqlite3_column_blob(st, 1) + skip, len);

        if (rd->more) {
            break;
        }
    }

    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        ngx_pty_archive_error(rd, db, "bytes");
        (void) sqlite3_finalize(st);
        return NGX_ERROR;
    }

    (void) sqlite3_finalize(st);

    return NGX_OK;
}


static ngx_int_t
ngx_pty_archive_list(ngx_pty_archive_read_t *rd, sqlite3 *db)
{
    int                      rc;
    sqlite3_stmt            *st;
    ngx_pty_archive_meta_t  *m;

    rc = sqlite3_prepare_v2(db, "SELECT " NGX_PTY_ARCHIVE_META_COLS
                            " FROM sessions s ORDER BY s.started DESC"
                            " LIMIT ?1", -1, &st, NULL);
    if (rc != SQLITE_OK) {
        ngx_pty_archive_error(rd, db, "prepare");
        return NGX_ERROR;
    }

    (void) sqlite3_bind_int64(st, 1, rd->to ? (int64_t) rd->to : 1000);

    rd->metas = ngx_array_create(rd->pool, 16,
                                 sizeof(ngx_pty_archive_meta_t));
    if (rd->metas == NULL) {
        (void) sqlite3_finalize(st);
        return NGX_ERROR;
    }

    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        m = ngx_array_push(rd->metas);
        if (m == NULL) {
            break;
        }

        ngx_memzero(m, sizeof(ngx_pty_archive_meta_t));
        ngx_pty_archive_meta_row(rd, st, m);
    }

    (void) sqlite3_finalize(st);

    return NGX_OK;
}


static u_char *
ngx_pty_archive_room(ngx_pty_archive_read_t *rd, size_t n)
{
    u_char  *p;
    size_t   size;

    if (rd->len + n > rd->size) {
        size = ngx_max(rd->size * 2, ngx_max(rd->len + n, 64 * 1024));

        p = realloc(rd->buf, size);
        if (p == NULL) {
            return NULL;
        }

        rd->buf = p;
        rd->size = size;
    }

    p = rd->buf + rd->len;
    rd->len += n;

    return p;
}


static void
ngx_pty_archive_done(ngx_event_t *ev)
{
    ngx_pty_archive_read_t  *rd = ev->data;

    rd->busy = 0;

    if (rd->data == NULL) {
        ngx_pty_archive_read_free(rd);
        return;
    }

    if (rd->rc == NGX_ERROR) {
        ngx_log_error(NGX_LOG_ERR, rd->log, 0,
                      "pty: reading the archive \"%s\" failed: %s",
                      ngx_pty_archive_path, rd->errmsg);
    }

    rd->handler(rd);
}

#endif
