
/*
 * The archive: one SQLite file (WAL) for every session of every worker.
 * docs/ARCHITECTURE.md, "Archive", says why a thread pool and not a
 * process of its own.
 *
 * Writing.  Any ring append notes the store, which arms a timer (batch=).
 * When it fires, the worker claims the sessions with frames past their
 * archive cursor (one worker per session at a time), copies those frames
 * out of the rings under each session's lock, and hands the batch to the
 * thread pool, which stores it in one transaction.  Only when that
 * committed do the cursors move, so a worker that dies loses no frame:
 * the next claimer copies them again from the ring (a frame stored twice
 * is ignored: its sequence is its key).  A cursor that fell below the
 * ring's tail (the writer was too slow, or the disk failed for longer
 * than the ring holds) skips to the tail and the gap is recorded.
 *
 * Reading runs in the pool too, on a connection of its own per read.
 */

#include "ngx_pty.h"
#include "ngx_pty_store.h"
#include "ngx_pty_util.h"
#include "ngx_pty_text.h"

#include <sqlite3.h>
#include <pwd.h>
#include <grp.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#if (NGX_THREADS)

#define NGX_PTY_STORE_SESSIONS   64           /* sessions per batch */
#define NGX_PTY_STORE_BYTES      (4 * 1024 * 1024) /* bytes per batch */
#define NGX_PTY_STORE_CHUNK      (256 * 1024)  /* copied per lock */
#define NGX_PTY_STORE_WAL_PAGES  512          /* 8 MiB: a checkpoint when idle */
#define NGX_PTY_STORE_WAL_MAX    4096         /* 64 MiB: one all the same */
#define NGX_PTY_STORE_FLOOD      (1024 * 1024) /* stored in a second: a flood */
#define NGX_PTY_STORE_READ_MAX   (8 * 1024 * 1024)
#define NGX_PTY_STORE_BACKOFF    10000        /* ms, the longest retry */
#define NGX_PTY_STORE_BUSY       5000         /* ms a writer waits a lock */
#define NGX_PTY_STORE_NONCE      12
#define NGX_PTY_STORE_TAG        16
#define NGX_PTY_STORE_SEALED(n)  ((n) + NGX_PTY_STORE_NONCE + NGX_PTY_STORE_TAG)


typedef struct {
    ngx_pty_session_sh_t      *sh;
    ngx_pty_store_session_t    meta;         /* command, acl: in data */
    ngx_uint_t                 has_meta;
    uint64_t                   keep_frames;
    uint64_t                   keep_ms;
    uint64_t                   gap_first;    /* 0: none */
    uint64_t                   gap_last;
    uint64_t                   last_seq;
    uint64_t                   next_off;
    size_t                     start;        /* its records in data */
    size_t                     end;
} ngx_pty_store_entry_t;


typedef struct {
    ngx_pty_store_entry_t      entries[NGX_PTY_STORE_SESSIONS];
    ngx_uint_t                 n;
    u_char                    *data;
    size_t                     len;
    ngx_uint_t                 more;         /* frames were left behind */
    ngx_uint_t                 prune;        /* prune after storing */
    ngx_uint_t                 flood;        /* output is pouring in */
    ngx_int_t                  rc;
    u_char                     err[160];
    ngx_uint_t                 pruned;
} ngx_pty_store_batch_t;


/* the writer's connection and statements: used by one task at a time */
typedef struct {
    sqlite3                   *db;
    sqlite3_stmt              *add_session;
    sqlite3_stmt              *find_sid;
    sqlite3_stmt              *add_frame;
    sqlite3_stmt              *set_last;
    sqlite3_stmt              *set_end;
    sqlite3_stmt              *add_gap;
    u_char                    *sealed;       /* a frame, encrypted */
    size_t                     sealed_size;
    int                        wal_pages;    /* in the WAL at the last commit */
} ngx_pty_store_writer_t;


static ngx_int_t ngx_pty_store_dir_check(ngx_conf_t *cf,
    ngx_pty_store_conf_t *sc);
static sqlite3 *ngx_pty_store_open(ngx_str_t *path, int flags, u_char *err);
static ngx_int_t ngx_pty_store_migrate(sqlite3 *db, u_char *err);
static ngx_int_t ngx_pty_store_end_orphans(sqlite3 *db, u_char *err);
static ngx_int_t ngx_pty_store_exec(sqlite3 *db, const char *sql,
    u_char *err);
static void ngx_pty_store_fail(sqlite3 *db, const char *what, u_char *err);

static void ngx_pty_store_timer_handler(ngx_event_t *ev);
static ngx_pty_store_batch_t *ngx_pty_store_collect(void);
static void ngx_pty_store_rate(ngx_pty_store_batch_t *b);
static int ngx_pty_store_wal_hook(void *data, sqlite3 *db, const char *name,
    int pages);
static void ngx_pty_store_checkpoint(ngx_pty_store_writer_t *w,
    ngx_pty_store_batch_t *b);
static ngx_uint_t ngx_pty_store_claim(ngx_pty_session_sh_t *sh);
static void ngx_pty_store_copy(ngx_pty_store_batch_t *b,
    ngx_pty_store_entry_t *e);
static ngx_int_t ngx_pty_store_copy_meta(ngx_pty_store_batch_t *b,
    ngx_pty_store_entry_t *e);
static ngx_int_t ngx_pty_store_copy_frames(ngx_pty_store_batch_t *b,
    ngx_pty_store_entry_t *e, uint64_t *off);
static void ngx_pty_store_write_thread(void *data, ngx_log_t *log);
static ngx_int_t ngx_pty_store_write(ngx_pty_store_batch_t *b);
static ngx_int_t ngx_pty_store_write_entry(ngx_pty_store_writer_t *w,
    ngx_pty_store_batch_t *b, ngx_pty_store_entry_t *e);
static ngx_int_t ngx_pty_store_step(sqlite3 *db, sqlite3_stmt *st,
    const char *what, u_char *err);
static ngx_int_t ngx_pty_store_write_session(ngx_pty_store_writer_t *w,
    ngx_pty_store_batch_t *b, ngx_pty_store_entry_t *e, sqlite_int64 *sid);
static ngx_int_t ngx_pty_store_write_frames(ngx_pty_store_writer_t *w,
    ngx_pty_store_batch_t *b, ngx_pty_store_entry_t *e, sqlite_int64 sid);
static ngx_int_t ngx_pty_store_writer_open(ngx_pty_store_writer_t *w,
    u_char *err);
static void ngx_pty_store_writer_close(ngx_pty_store_writer_t *w);
static ngx_int_t ngx_pty_store_bind_data(ngx_pty_store_writer_t *w,
    u_char *id, ngx_pty_frame_t *f, u_char *err);
static ngx_int_t ngx_pty_store_bind_command(ngx_pty_store_writer_t *w,
    ngx_pty_store_session_t *m, u_char *err);
static void ngx_pty_store_episode(ngx_log_t *log, u_char *err);
static void ngx_pty_store_write_done(ngx_event_t *ev);
static void ngx_pty_store_commit(ngx_pty_store_batch_t *b, ngx_log_t *log);
static void ngx_pty_store_batch_free(ngx_pty_store_batch_t *b);
static ngx_int_t ngx_pty_store_prune(sqlite3 *db, u_char *err);
static ngx_int_t ngx_pty_store_prune_running(sqlite3 *db, uint64_t now,
    u_char *err);

static ngx_int_t ngx_pty_store_seal(ngx_pty_store_key_t *k, u_char *id,
    uint64_t seq, ngx_uint_t kind, const u_char *in, size_t len,
    u_char *out);
static ngx_int_t ngx_pty_store_unseal(u_char *id, uint64_t seq,
    ngx_uint_t kind, uint32_t enc, const u_char *in, size_t len, u_char *out,
    u_char *err);
static void ngx_pty_store_read_thread(void *data, ngx_log_t *log);
static ngx_int_t ngx_pty_store_read_session(sqlite3 *db,
    ngx_pty_store_read_t *rd);
static ngx_int_t ngx_pty_store_tail(sqlite3 *db, sqlite_int64 sid,
    ngx_pty_store_read_t *rd);
static ngx_int_t ngx_pty_store_read_frames(sqlite3 *db, sqlite_int64 sid,
    ngx_pty_store_read_t *rd);
static ngx_int_t ngx_pty_store_row(sqlite3_stmt *st,
    ngx_pty_store_session_t *m, ngx_pty_store_read_t *rd);
static ngx_int_t ngx_pty_store_read_list(sqlite3 *db,
    ngx_pty_store_read_t *rd);
static ngx_int_t ngx_pty_store_read_scroll(sqlite3 *db,
    ngx_pty_store_read_t *rd);
static ngx_int_t ngx_pty_store_frame_row(sqlite3_stmt *st,
    ngx_pty_store_read_t *rd, ngx_pty_frame_t *f);
static ngx_int_t ngx_pty_store_read_text(sqlite3 *db, sqlite_int64 sid,
    ngx_pty_store_read_t *rd);
static ngx_int_t ngx_pty_store_feed_text(sqlite3 *db, sqlite_int64 sid,
    ngx_pty_store_read_t *rd, ngx_pty_text_t *t);
static void ngx_pty_store_read_done(ngx_event_t *ev);


static ngx_pty_store_conf_t   *ngx_pty_store_conf;
static ngx_pty_store_writer_t  ngx_pty_store_writer;
static ngx_event_t             ngx_pty_store_timer;
static ngx_uint_t              ngx_pty_store_busy;
static ngx_uint_t              ngx_pty_store_again;
static ngx_msec_t              ngx_pty_store_backoff;
static ngx_msec_t              ngx_pty_store_hurried;
static u_char                 *ngx_pty_store_buf;


static const char  *ngx_pty_store_schema[] = {
    "CREATE TABLE sessions ("
    " sid INTEGER PRIMARY KEY,"
    " id TEXT NOT NULL UNIQUE,"
    " name INTEGER NOT NULL,"
    " command TEXT NOT NULL,"
    " acl BLOB NOT NULL,"
    " cols INTEGER NOT NULL,"
    " rows INTEGER NOT NULL,"
    " started INTEGER NOT NULL,"
    " ended INTEGER,"
    " exit_code INTEGER,"
    " reason INTEGER,"
    " last_seq INTEGER NOT NULL DEFAULT 0,"
    " keep_frames INTEGER NOT NULL DEFAULT 0,"
    " keep_ms INTEGER NOT NULL DEFAULT 0,"
    " gaps INTEGER NOT NULL DEFAULT 0,"
    " cmd_enc INTEGER NOT NULL DEFAULT 0)",
    "CREATE INDEX sessions_name ON sessions (name, started)",
    "CREATE INDEX sessions_ended ON sessions (ended)",
    "CREATE TABLE frames ("
    " sid INTEGER NOT NULL,"
    " seq INTEGER NOT NULL,"
    " ts INTEGER NOT NULL,"
    " kind INTEGER NOT NULL,"
    " target INTEGER NOT NULL,"
    " anchor INTEGER NOT NULL,"
    " cols INTEGER NOT NULL,"
    " rows INTEGER NOT NULL,"
    " uuid BLOB NOT NULL,"
    " enc INTEGER NOT NULL DEFAULT 0,"
    " data BLOB NOT NULL,"
    " PRIMARY KEY (sid, seq))",
    "CREATE TABLE gaps ("
    " sid INTEGER NOT NULL,"
    " first INTEGER NOT NULL,"
    " last INTEGER NOT NULL,"
    " at INTEGER NOT NULL)",
    "CREATE INDEX gaps_sid ON gaps (sid)",
    NULL
};


#define NGX_PTY_STORE_COLUMNS                                                 \
    "sid, id, name, command, acl, cols, rows, started, ended,"                \
    " exit_code, reason, last_seq, gaps, cmd_enc"


/* pty_archive off | path [thread_pool=name] [max_size=size]
 *     [keep_closed=time] [batch=time] [prune=time] */
char *
ngx_pty_store_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_pty_main_conf_t  *pmcf = conf;

    u_char                *p;
    ngx_str_t             *value, v, pool;
    ngx_int_t              n;
    ngx_uint_t             i;
    ngx_pty_store_conf_t  *sc;

    if (pmcf->store != NGX_CONF_UNSET_PTR) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_strcmp(value[1].data, "off") == 0 && cf->args->nelts == 2) {
        pmcf->store = NULL;
        return NGX_CONF_OK;
    }

    sc = ngx_pcalloc(cf->pool, sizeof(ngx_pty_store_conf_t));
    if (sc == NULL) {
        return NGX_CONF_ERROR;
    }

    sc->path = value[1];

    if (ngx_conf_full_name(cf->cycle, &sc->path, 0) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    sc->dir = sc->path;

    for (p = sc->dir.data + sc->dir.len; p > sc->dir.data; p--) {
        if (p[-1] == '/') {
            break;
        }
    }

    sc->dir.len = (p - sc->dir.data > 1) ? (size_t) (p - sc->dir.data - 1)
                                         : 1;

    sc->keep_closed = 7 * 86400;
    sc->batch = 100;
    sc->prune = 60000;
    ngx_str_set(&pool, "default");

    for (i = 2; i < cf->args->nelts; i++) {
        p = (u_char *) ngx_strchr(value[i].data, '=');

        if (p == NULL) {
            goto invalid;
        }

        v.data = p + 1;
        v.len = value[i].data + value[i].len - v.data;

        if (ngx_strncmp(value[i].data, "thread_pool=", 12) == 0) {
            pool = v;

        } else if (ngx_strncmp(value[i].data, "max_size=", 9) == 0) {
            sc->max_size = ngx_parse_offset(&v);
            if (sc->max_size == NGX_ERROR) {
                goto invalid;
            }

        } else if (ngx_strncmp(value[i].data, "keep_closed=", 12) == 0) {
            n = ngx_parse_time(&v, 1);
            if (n == NGX_ERROR) {
                goto invalid;
            }
            sc->keep_closed = n;

        } else if (ngx_strncmp(value[i].data, "batch=", 6) == 0) {
            n = ngx_parse_time(&v, 0);
            if (n == NGX_ERROR || n < 1 || n > 10000) {
                goto invalid;
            }
            sc->batch = n;

        } else if (ngx_strncmp(value[i].data, "prune=", 6) == 0) {
            n = ngx_parse_time(&v, 0);
            if (n == NGX_ERROR || n < 100) {
                goto invalid;
            }
            sc->prune = n;

        } else {
            goto invalid;
        }
    }

    sc->pool = ngx_thread_pool_add(cf, &pool);
    if (sc->pool == NULL) {
        return NGX_CONF_ERROR;
    }

    if (ngx_pty_store_dir_check(cf, sc) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    pmcf->store = sc;

    return NGX_CONF_OK;

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid parameter \"%V\": pty_archive takes a path "
                       "and thread_pool=, max_size=, keep_closed=, batch= "
                       "(1ms..10s), prune= (100ms at least)", &value[i]);
    return NGX_CONF_ERROR;
}


/*
 * pty_archive_key file: 32 bytes, raw or as 64 hex digits.  Read here,
 * by the master, so that the file may be readable by root alone.  Its id
 * is the key's SHA-256 cut to 31 bits: rows name their key by it, and
 * no two files need to be told apart by hand.
 */
char *
ngx_pty_store_key_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_pty_main_conf_t  *pmcf = conf;

    u_char               buf[130], digest[32];
    ssize_t              n;
    ngx_fd_t             fd;
    ngx_str_t           *value;
    ngx_uint_t           i;
    unsigned int         dlen;
    ngx_pty_store_key_t *k;

    value = cf->args->elts;

    if (pmcf->archive_keys == NULL) {
        pmcf->archive_keys = ngx_array_create(cf->pool, 2,
                                              sizeof(ngx_pty_store_key_t));
        if (pmcf->archive_keys == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    k = ngx_array_push(pmcf->archive_keys);
    if (k == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_memzero(k, sizeof(ngx_pty_store_key_t));
    k->file = value[1];

    if (ngx_conf_full_name(cf->cycle, &k->file, 1) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    fd = ngx_open_file(k->file.data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
    if (fd == NGX_INVALID_FILE) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           "pty_archive_key: cannot open \"%V\"", &k->file);
        return NGX_CONF_ERROR;
    }

    n = ngx_read_fd(fd, buf, sizeof(buf));
    (void) ngx_close_file(fd);

    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'
                     || buf[n - 1] == ' '))
    {
        n--;
    }

    if (n == 32) {
        ngx_memcpy(k->key, buf, 32);

    } else if (n == 64) {
        for (i = 0; i < 32; i++) {
            if (ngx_hextoi(&buf[2 * i], 2) == NGX_ERROR) {
                goto invalid;
            }

            k->key[i] = (u_char) ngx_hextoi(&buf[2 * i], 2);
        }

    } else {
        goto invalid;
    }

    ngx_explicit_memzero(buf, sizeof(buf));

    if (EVP_Digest(k->key, 32, digest, &dlen, EVP_sha256(), NULL) != 1) {
        return NGX_CONF_ERROR;
    }

    k->id = (((uint32_t) digest[0] << 24 | (uint32_t) digest[1] << 16
              | (uint32_t) digest[2] << 8 | digest[3])
             & 0x7fffffff) | 1;

    for (i = 0; i + 1 < pmcf->archive_keys->nelts; i++) {
        if (((ngx_pty_store_key_t *) pmcf->archive_keys->elts)[i].id
            == k->id)
        {
            return "names a key given already";
        }
    }

    return NGX_CONF_OK;

invalid:

    ngx_explicit_memzero(buf, sizeof(buf));
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "pty_archive_key: \"%V\" must hold a 256-bit key: 32 "
                       "bytes, or 64 hex digits", &k->file);
    return NGX_CONF_ERROR;
}


/*
 * A frame's data (or, as sequence 0, the session's command line) as
 * nonce, ciphertext and tag (AES-256-GCM).  The session id, sequence and
 * kind are authenticated with it: a row copied to another place does not
 * open there.
 */
static ngx_int_t
ngx_pty_store_seal(ngx_pty_store_key_t *k, u_char *id, uint64_t seq,
    ngx_uint_t kind, const u_char *in, size_t len, u_char *out)
{
    int               n, ok;
    u_char            aad[NGX_PTY_ID_LEN + 10];
    uint16_t          k16;
    EVP_CIPHER_CTX   *ctx;

    k16 = (uint16_t) kind;
    ngx_memcpy(aad, id, NGX_PTY_ID_LEN);
    ngx_memcpy(aad + NGX_PTY_ID_LEN, &seq, 8);
    ngx_memcpy(aad + NGX_PTY_ID_LEN + 8, &k16, 2);

    if (RAND_bytes(out, NGX_PTY_STORE_NONCE) != 1) {
        return NGX_ERROR;
    }

    ctx = EVP_CIPHER_CTX_new();
    if (ctx == NULL) {
        return NGX_ERROR;
    }

    ok = EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, k->key, out) == 1
         && EVP_EncryptUpdate(ctx, NULL, &n, aad, sizeof(aad)) == 1
         && EVP_EncryptUpdate(ctx, out + NGX_PTY_STORE_NONCE, &n, in, len)
            == 1
         && EVP_EncryptFinal_ex(ctx, out + NGX_PTY_STORE_NONCE + n, &n) == 1
         && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, NGX_PTY_STORE_TAG,
                                out + NGX_PTY_STORE_NONCE + len) == 1;

    EVP_CIPHER_CTX_free(ctx);

    return ok ? NGX_OK : NGX_ERROR;
}


/* a row's data in clear, len less the nonce and tag; err says why not */
static ngx_int_t
ngx_pty_store_unseal(u_char *id, uint64_t seq, ngx_uint_t kind,
    uint32_t enc, const u_char *in, size_t len, u_char *out, u_char *err)
{
    int                   n, ok;
    u_char                aad[NGX_PTY_ID_LEN + 10];
    uint16_t              k16;
    ngx_uint_t            i;
    EVP_CIPHER_CTX       *ctx;
    ngx_pty_store_key_t  *k, *keys;

    k = NULL;

    if (ngx_pty_store_conf->keys) {
        keys = ngx_pty_store_conf->keys->elts;

        for (i = 0; i < ngx_pty_store_conf->keys->nelts; i++) {
            if (keys[i].id == enc) {
                k = &keys[i];
                break;
            }
        }
    }

    if (k == NULL) {
        ngx_snprintf(err, 159, "frame %uL was stored with key %uD, which no "
                     "pty_archive_key holds%Z", seq, enc);
        return NGX_ERROR;
    }

    if (len < NGX_PTY_STORE_SEALED(0)) {
        goto damaged;
    }

    k16 = (uint16_t) kind;
    ngx_memcpy(aad, id, NGX_PTY_ID_LEN);
    ngx_memcpy(aad + NGX_PTY_ID_LEN, &seq, 8);
    ngx_memcpy(aad + NGX_PTY_ID_LEN + 8, &k16, 2);

    len -= NGX_PTY_STORE_SEALED(0);

    ctx = EVP_CIPHER_CTX_new();
    if (ctx == NULL) {
        ngx_snprintf(err, 159, "out of memory%Z");
        return NGX_ERROR;
    }

    ok = EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, k->key, in) == 1
         && EVP_DecryptUpdate(ctx, NULL, &n, aad, sizeof(aad)) == 1
         && EVP_DecryptUpdate(ctx, out, &n, in + NGX_PTY_STORE_NONCE,
                              len) == 1
         && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, NGX_PTY_STORE_TAG,
                                (void *) (in + NGX_PTY_STORE_NONCE + len))
            == 1
         && EVP_DecryptFinal_ex(ctx, out + n, &n) == 1;

    EVP_CIPHER_CTX_free(ctx);

    if (ok) {
        return NGX_OK;
    }

damaged:

    ngx_snprintf(err, 159, "frame %uL does not open with key %uD (\"%V\"): "
                 "a damaged row%Z", seq, enc, &k->file);
    return NGX_ERROR;
}


/*
 * The workers, not the master that reads this, open the file: its
 * directory must let their user create the journal beside it.  The
 * "user" directive comes before "http" or not at all (nginx's default).
 */
static ngx_int_t
ngx_pty_store_dir_check(ngx_conf_t *cf, ngx_pty_store_conf_t *sc)
{
    u_char           *dir;
    ngx_uid_t         uid;
    ngx_gid_t         gid;
    ngx_uint_t        ok;
    struct stat       st;
    struct passwd    *pw;
    ngx_core_conf_t  *ccf;

    dir = ngx_pnalloc(cf->pool, sc->dir.len + 1);
    if (dir == NULL) {
        return NGX_ERROR;
    }

    (void) ngx_cpystrn(dir, sc->dir.data, sc->dir.len + 1);

    if (stat((char *) dir, &st) == -1 || !S_ISDIR(st.st_mode)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           "pty_archive: no directory \"%s\" for \"%V\"",
                           dir, &sc->path);
        return NGX_ERROR;
    }

    if (geteuid() != 0) {
        /* the workers are this user */
        if (access((char *) dir, W_OK | X_OK) == 0) {
            return NGX_OK;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           "pty_archive: directory \"%s\" is not writable "
                           "by this user", dir);
        return NGX_ERROR;
    }

    ccf = (ngx_core_conf_t *) ngx_get_conf(cf->cycle->conf_ctx,
                                           ngx_core_module);

    if (ccf->user != (ngx_uid_t) NGX_CONF_UNSET_UINT) {
        uid = ccf->user;
        gid = ccf->group;

    } else {
        pw = getpwnam(NGX_USER);
        if (pw == NULL) {
            return NGX_OK;      /* nginx itself will say so */
        }

        uid = pw->pw_uid;
        gid = pw->pw_gid;
    }

    if (uid == 0) {
        return NGX_OK;
    }

    if (st.st_uid == uid) {
        ok = (st.st_mode & (S_IWUSR | S_IXUSR)) == (S_IWUSR | S_IXUSR);

    } else if (st.st_gid == gid) {
        ok = (st.st_mode & (S_IWGRP | S_IXGRP)) == (S_IWGRP | S_IXGRP);

    } else {
        ok = (st.st_mode & (S_IWOTH | S_IXOTH)) == (S_IWOTH | S_IXOTH);
    }

    if (ok) {
        return NGX_OK;
    }

    pw = getpwuid(uid);

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "pty_archive: directory \"%s\" is not writable by "
                       "the workers' user \"%s\" (uid %ui); the archive's "
                       "journal is created beside the file", dir,
                       pw ? pw->pw_name : "?", (ngx_uint_t) uid);

    return NGX_ERROR;
}


ngx_uint_t
ngx_pty_store_enabled(void)
{
    return ngx_pty_store_conf != NULL;
}


static sqlite3 *
ngx_pty_store_open(ngx_str_t *path, int flags, u_char *err)
{
    u_char   name[NGX_MAX_PATH];
    sqlite3  *db;

    if (path->len >= NGX_MAX_PATH) {
        ngx_snprintf(err, 159, "the path is too long%Z");
        return NULL;
    }

    (void) ngx_cpystrn(name, path->data, path->len + 1);

    db = NULL;

    if (sqlite3_open_v2((char *) name, &db, flags | SQLITE_OPEN_NOMUTEX,
                        NULL)
        != SQLITE_OK)
    {
        ngx_pty_store_fail(db, "open", err);
        sqlite3_close(db);
        return NULL;
    }

    (void) sqlite3_extended_result_codes(db, 1);
    (void) sqlite3_busy_timeout(db, NGX_PTY_STORE_BUSY);

    return db;
}


static void
ngx_pty_store_fail(sqlite3 *db, const char *what, u_char *err)
{
    ngx_snprintf(err, 159, "%s: %s (%d)%Z", what,
                 db ? sqlite3_errmsg(db) : "out of memory",
                 db ? sqlite3_extended_errcode(db) : SQLITE_NOMEM);
}


static ngx_int_t
ngx_pty_store_exec(sqlite3 *db, const char *sql, u_char *err)
{
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
        ngx_pty_store_fail(db, sql, err);
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* a new file gets the schema; an older one is brought up to date */
static ngx_int_t
ngx_pty_store_migrate(sqlite3 *db, u_char *err)
{
    int            version;
    ngx_uint_t     i;
    sqlite3_stmt  *st;

    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL)
        != SQLITE_OK
        || sqlite3_step(st) != SQLITE_ROW)
    {
        ngx_pty_store_fail(db, "reading its version", err);
        sqlite3_finalize(st);
        return NGX_ERROR;
    }

    version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);

    if (version == NGX_PTY_STORE_SCHEMA) {
        return NGX_OK;
    }

    if (version > NGX_PTY_STORE_SCHEMA) {
        ngx_snprintf(err, 159, "schema %d is newer than this module's %d%Z",
                     version, NGX_PTY_STORE_SCHEMA);
        return NGX_ERROR;
    }

    /* version 0: a new file (the only older version there is) */

    /* frames are up to 16 KiB: larger pages keep most of one in one */
    if (ngx_pty_store_exec(db, "PRAGMA page_size = 16384", err) != NGX_OK
        || ngx_pty_store_exec(db, "PRAGMA auto_vacuum = INCREMENTAL", err)
           != NGX_OK
        || ngx_pty_store_exec(db, "BEGIN IMMEDIATE", err) != NGX_OK)
    {
        return NGX_ERROR;
    }

    for (i = 0; ngx_pty_store_schema[i]; i++) {
        if (ngx_pty_store_exec(db, ngx_pty_store_schema[i], err) != NGX_OK) {
            (void) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            return NGX_ERROR;
        }
    }

    if (ngx_pty_store_exec(db, "PRAGMA user_version = 1", err) != NGX_OK
        || ngx_pty_store_exec(db, "COMMIT", err) != NGX_OK)
    {
        (void) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return NGX_ERROR;
    }

    return NGX_OK;
}


/*
 * Sessions the archive holds as running but no zone knows: their nginx
 * is gone (a stop it could not store the end of, a crash, a power cut).
 * Each gets the end it would have had: a Closed instance_terminated
 * frame after its last stored one.
 */
static ngx_int_t
ngx_pty_store_end_orphans(sqlite3 *db, u_char *err)
{
    u_char         uuid[16], id[NGX_PTY_ID_LEN];
    size_t         len;
    uint64_t       now;
    ngx_str_t      key;
    sqlite3_stmt  *sel, *frame, *end;
    sqlite_int64   sid, last;

    static const char  closed[] =
        "{\"kind\":\"Closed\",\"exit_code\":null,"
        "\"reason\":\"instance_terminated\","
        "\"detail\":\"the nginx that ran it is gone\"}";

    sel = NULL;
    frame = NULL;
    end = NULL;

    if (sqlite3_prepare_v2(db, "SELECT sid, id, last_seq FROM sessions"
                           " WHERE ended IS NULL", -1, &sel, NULL)
        != SQLITE_OK
        || sqlite3_prepare_v2(db, "INSERT OR IGNORE INTO frames"
                              " (sid, seq, ts, kind, target, anchor, cols,"
                              " rows, uuid, data)"
                              " VALUES (?, ?, ?, ?, 0, 0, 0, 0, ?, ?)",
                              -1, &frame, NULL)
           != SQLITE_OK
        || sqlite3_prepare_v2(db, "UPDATE sessions SET ended = ?,"
                              " reason = ?, last_seq = ? WHERE sid = ?",
                              -1, &end, NULL)
           != SQLITE_OK
        || ngx_pty_store_exec(db, "BEGIN IMMEDIATE", err) != NGX_OK)
    {
        if (err[0] == '\0') {
            ngx_pty_store_fail(db, "ending orphans", err);
        }

        goto failed;
    }

    now = ngx_pty_now_ms();

    while (sqlite3_step(sel) == SQLITE_ROW) {
        sid = sqlite3_column_int64(sel, 0);
        len = sqlite3_column_bytes(sel, 1);
        last = sqlite3_column_int64(sel, 2);

        if (len != NGX_PTY_ID_LEN) {
            continue;
        }

        ngx_memcpy(id, sqlite3_column_text(sel, 1), NGX_PTY_ID_LEN);
        key.data = id;
        key.len = NGX_PTY_ID_LEN;

        if (ngx_pty_shm_zone() && ngx_pty_shm_session_find(&key) != NULL) {
            /* a reload: it runs on in the zone */
            continue;
        }

        ngx_pty_uuid7(uuid, now);

        sqlite3_bind_int64(frame, 1, sid);
        sqlite3_bind_int64(frame, 2, last + 1);
        sqlite3_bind_int64(frame, 3, now);
        sqlite3_bind_int(frame, 4, NGX_PTY_FRAME_CLOSED);
        sqlite3_bind_blob(frame, 5, uuid, 16, SQLITE_TRANSIENT);
        sqlite3_bind_blob(frame, 6, closed, sizeof(closed) - 1,
                          SQLITE_STATIC);

        sqlite3_bind_int64(end, 1, now);
        sqlite3_bind_int(end, 2, NGX_PTY_CLOSED_INSTANCE_TERMINATED);
        sqlite3_bind_int64(end, 3, last + 1);
        sqlite3_bind_int64(end, 4, sid);

        if (sqlite3_step(frame) != SQLITE_DONE
            || sqlite3_step(end) != SQLITE_DONE)
        {
            ngx_pty_store_fail(db, "ending orphans", err);
            (void) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            goto failed;
        }

        sqlite3_reset(frame);
        sqlite3_reset(end);
    }

    if (ngx_pty_store_exec(db, "COMMIT", err) != NGX_OK) {
        (void) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        goto failed;
    }

    sqlite3_finalize(sel);
    sqlite3_finalize(frame);
    sqlite3_finalize(end);

    return NGX_OK;

failed:

    sqlite3_finalize(sel);
    sqlite3_finalize(frame);
    sqlite3_finalize(end);

    return NGX_ERROR;
}


/*
 * In the master, before any worker: the file is made, migrated and given
 * to the workers' user, and the sessions of a run that ended without a
 * word are ended.  A file that cannot be opened does not stop nginx:
 * terminals work without an archive, and the workers try again.
 */
ngx_int_t
ngx_pty_store_init_module(ngx_cycle_t *cycle)
{
    u_char                name[NGX_MAX_PATH + 8], err[160];
    mode_t                mask;
    sqlite3              *db;
    ngx_uint_t            i;
    ngx_core_conf_t      *ccf;
    ngx_pty_zone_t       *zone;
    ngx_pty_main_conf_t  *pmcf;

    static const char  *suffix[] = { "", "-wal", "-shm" };

    pmcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_pty_module);

    ngx_pty_store_conf = (pmcf && pmcf->store != NGX_CONF_UNSET_PTR)
                         ? pmcf->store : NULL;

    if (ngx_pty_store_conf) {
        ngx_pty_store_conf->keys = pmcf->archive_keys;
    }

    zone = ngx_pty_shm_zone();

    if (zone) {
        zone->sh->archive = (ngx_pty_store_conf != NULL);
    }

    if (ngx_pty_store_conf == NULL
        || ngx_test_config || ngx_process == NGX_PROCESS_SIGNALLER)
    {
        return NGX_OK;
    }

    err[0] = '\0';

    /*
     * a new file is the workers' user's alone: it holds every session's
     * output, and programs run as other users (SQLite gives the journal
     * files the file's mode)
     */
    mask = umask(077);
    db = ngx_pty_store_open(&ngx_pty_store_conf->path,
                            SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, err);
    (void) umask(mask);

    if (db == NULL
        || ngx_pty_store_migrate(db, err) != NGX_OK
        || ngx_pty_store_exec(db, "PRAGMA journal_mode = WAL", err) != NGX_OK
        || ngx_pty_store_end_orphans(db, err) != NGX_OK)
    {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "pty: archive \"%V\": %s; sessions run without it "
                      "until it can be written",
                      &ngx_pty_store_conf->path, err);
    }

    if (db) {
        sqlite3_close(db);
    }

    ccf = (ngx_core_conf_t *) ngx_get_conf(cycle->conf_ctx, ngx_core_module);

    if (geteuid() != 0 || ccf->user == 0) {
        return NGX_OK;
    }

    for (i = 0; i < 3; i++) {
        ngx_snprintf(name, sizeof(name), "%V%s%Z",
                     &ngx_pty_store_conf->path, suffix[i]);

        if (chown((char *) name, ccf->user, ccf->group) == -1
            && ngx_errno != NGX_ENOENT)
        {
            ngx_log_error(NGX_LOG_ALERT, cycle->log, ngx_errno,
                          "pty: chown(\"%s\") failed", name);
        }
    }

    return NGX_OK;
}


ngx_int_t
ngx_pty_store_init_process(ngx_cycle_t *cycle)
{
    if (ngx_pty_store_conf == NULL) {
        return NGX_OK;
    }

    ngx_pty_store_timer.handler = ngx_pty_store_timer_handler;
    ngx_pty_store_timer.log = cycle->log;
    ngx_pty_store_timer.data = cycle;
    ngx_pty_store_timer.cancelable = 1;

    /* what a worker killed before it stored is stored now */
    ngx_add_timer(&ngx_pty_store_timer, ngx_pty_store_conf->batch);

    return NGX_OK;
}


void
ngx_pty_store_exit_process(ngx_cycle_t *cycle)
{
    /* the thread pools are gone by now: no task uses the writer */
    ngx_pty_store_writer_close(&ngx_pty_store_writer);
}


/*
 * A session has new frames.  They wait for the batch time, or not at all
 * when a quarter of what its ring may hold (256 KiB at most) is not
 * stored yet (a flood): the ring must not evict what is not stored.
 */
void
ngx_pty_store_note(ngx_pty_session_sh_t *sh)
{
    ngx_msec_t       delay;
    ngx_uint_t       urgent;
    ngx_pty_zone_t  *zone;

    if (ngx_pty_store_conf == NULL || ngx_process == NGX_PROCESS_MASTER
        || ngx_pty_store_timer.handler == NULL)
    {
        return;
    }

    if (ngx_pty_store_backoff) {
        zone = ngx_pty_shm_zone();

        if (zone == NULL || zone->sh->arch_failing
            || ngx_current_msec - ngx_pty_store_hurried
               < ngx_pty_store_backoff)
        {
            /*
             * the file is failing: a flood waits for the retry too; a
             * retry that found nothing to store set no timer
             */
            if (!ngx_pty_store_timer.timer_set && !ngx_pty_store_busy) {
                ngx_add_timer(&ngx_pty_store_timer, ngx_pty_store_backoff);
            }

            return;
        }

        /*
         * another worker has written since: the fault is over, most
         * likely, so the retry is now; once a backoff at most, as a
         * fault of this worker's own would log at every other's batch
         */
        ngx_pty_store_hurried = ngx_current_msec;
    }

    /* unlocked: a hint; typing and prompts wait for the batch */
    urgent = (sh->ring->head - sh->ring->stored
              > ngx_min(sh->ring->max_size / 4, 256 * 1024));

    if (ngx_pty_store_busy) {
        ngx_pty_store_again = ngx_max(ngx_pty_store_again, urgent + 1);
        return;
    }

    delay = urgent ? 1 : ngx_pty_store_conf->batch;

    if (ngx_pty_store_timer.timer_set) {
        if (ngx_pty_store_timer.timer.key <= ngx_current_msec + delay) {
            return;
        }

        ngx_del_timer(&ngx_pty_store_timer);
    }

    ngx_add_timer(&ngx_pty_store_timer, delay);
}


static void
ngx_pty_store_timer_handler(ngx_event_t *ev)
{
    ngx_thread_task_t      *task;
    ngx_pty_store_batch_t  *b;

    if (ngx_pty_store_busy || ngx_exiting || ngx_terminate || ngx_quit) {
        return;
    }

    b = ngx_pty_store_collect();

    if (b == NULL) {
        return;
    }

    ngx_pty_store_rate(b);

    task = ngx_calloc(sizeof(ngx_thread_task_t), ev->log);
    if (task == NULL) {
        ngx_pty_store_commit(b, NULL);     /* gives the claims back */
        ngx_pty_store_batch_free(b);
        return;
    }

    task->ctx = b;
    task->handler = ngx_pty_store_write_thread;
    task->event.handler = ngx_pty_store_write_done;
    task->event.data = task;
    task->event.log = ev->log;

    if (ngx_thread_task_post(ngx_pty_store_conf->pool, task) != NGX_OK) {
        b->rc = NGX_ERROR;
        ngx_snprintf(b->err, 159, "the thread pool's queue is full%Z");
        ngx_pty_store_write_done(&task->event);
        return;
    }

    ngx_pty_store_busy = 1;
}


/* the bytes stored in this second and the one before: a flood's mark */
static void
ngx_pty_store_rate(ngx_pty_store_batch_t *b)
{
    static ngx_msec_t  start;
    static size_t      now, before;

    if (ngx_current_msec - start >= 1000) {
        before = (ngx_current_msec - start < 2000) ? now : 0;
        now = 0;
        start = ngx_current_msec;
    }

    now += b->len;
    b->flood = (now + before >= NGX_PTY_STORE_FLOOD);
}


/*
 * The sessions with frames to store, claimed and retained, their frames
 * copied; NULL when there is nothing to store (or no memory: the timer
 * of the next note tries again).
 */
static ngx_pty_store_batch_t *
ngx_pty_store_collect(void)
{
    ngx_queue_t            *q;
    ngx_uint_t              i;
    ngx_pty_zone_t         *zone;
    ngx_pty_session_sh_t   *sh;
    ngx_pty_store_batch_t  *b;

    zone = ngx_pty_shm_zone();
    if (zone == NULL) {
        return NULL;
    }

    b = ngx_calloc(sizeof(ngx_pty_store_batch_t), ngx_cycle->log);
    if (b == NULL) {
        return NULL;
    }

    /* one batch at a time: its buffer is kept, not faulted in anew */
    if (ngx_pty_store_buf == NULL) {
        ngx_pty_store_buf = ngx_alloc(NGX_PTY_STORE_BYTES, ngx_cycle->log);
        if (ngx_pty_store_buf == NULL) {
            ngx_free(b);
            return NULL;
        }
    }

    b->data = ngx_pty_store_buf;

    ngx_shmtx_lock(&zone->shpool->mutex);

    for (q = ngx_queue_head(&zone->sh->sessions);
         q != ngx_queue_sentinel(&zone->sh->sessions);
         q = ngx_queue_next(q))
    {
        sh = ngx_queue_data(q, ngx_pty_session_sh_t, queue);

        /* unlocked reads: a hint, looked at again under the lock */
        if (sh->restored
            || (sh->arch_seq == sh->seq
                && (sh->state < NGX_PTY_STATE_CLOSED || sh->arch_ended)))
        {
            continue;
        }

        if (b->n == NGX_PTY_STORE_SESSIONS) {
            b->more = 1;
            break;
        }

        if (!ngx_pty_store_claim(sh)) {
            continue;
        }

        ngx_pty_shm_session_retain(sh);
        b->entries[b->n++].sh = sh;
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    for (i = 0; i < b->n; i++) {
        ngx_pty_store_copy(b, &b->entries[i]);
    }

    if (b->n == 0) {
        ngx_pty_store_batch_free(b);
        return NULL;
    }

    if (zone->sh->arch_prune == 0) {
        /* a new zone: the first pruning waits its interval */
        (void) ngx_atomic_cmp_set(&zone->sh->arch_prune, 0,
                                  ngx_time()
                                  + ngx_pty_store_conf->prune / 1000);

    } else if (zone->sh->arch_prune <= (ngx_atomic_uint_t) ngx_time()) {
        /* one worker prunes each time: whoever moves the time on */
        b->prune = ngx_atomic_cmp_set(&zone->sh->arch_prune,
                                      zone->sh->arch_prune,
                                      ngx_time()
                                      + ngx_pty_store_conf->prune / 1000);
    }

    return b;
}


static ngx_uint_t
ngx_pty_store_claim(ngx_pty_session_sh_t *sh)
{
    ngx_atomic_uint_t  holder;

    holder = sh->arch_claim;

    if (holder == (ngx_atomic_uint_t) ngx_pid) {
        return 0;                /* in this worker's batch in flight */
    }

    /*
     * under the zone's mutex: a signal 0, not a read of /proc (a killed
     * worker's claim waits for the master to reap it, a moment)
     */
    if (holder && (kill((ngx_pid_t) holder, 0) == 0 || ngx_errno == NGX_EPERM))
    {
        return 0;
    }

    return ngx_atomic_cmp_set(&sh->arch_claim, holder,
                              (ngx_atomic_uint_t) ngx_pid);
}


/*
 * The session's unstored frames and what it is.  The lock is dropped
 * every NGX_PTY_STORE_CHUNK bytes: a flood's reads wait for a copy of
 * that much at most, not for the whole batch.
 */
static void
ngx_pty_store_copy(ngx_pty_store_batch_t *b, ngx_pty_store_entry_t *e)
{
    uint64_t               off, first;
    ngx_pty_ring_t        *ring;
    ngx_pty_session_sh_t  *sh;

    sh = e->sh;
    ring = sh->ring;

    ngx_pty_shm_lock(sh);

    e->last_seq = sh->arch_seq;
    e->next_off = sh->ring->stored;
    e->start = b->len;
    e->end = b->len;

    if (sh->state == NGX_PTY_STATE_GONE || ring->data == NULL
        || ngx_pty_store_copy_meta(b, e) != NGX_OK)
    {
        ngx_pty_shm_unlock(sh);
        return;
    }

    off = sh->ring->stored;

    if (off < ring->tail) {
        first = ngx_pty_ring_first_seq(ring);
        e->gap_first = sh->arch_seq + 1;
        e->gap_last = first ? first - 1 : sh->seq;
        e->last_seq = e->gap_last;
        off = ring->tail;

        if (e->gap_first > e->gap_last) {
            e->gap_first = 0;       /* only pads were skipped */
        }
    }

    while (ngx_pty_store_copy_frames(b, e, &off) == NGX_AGAIN) {
        ngx_pty_shm_unlock(sh);
        ngx_pty_shm_lock(sh);

        if (off < ring->tail) {
            break;      /* evicted meanwhile: the next batch has the gap */
        }
    }

    e->next_off = off;
    e->end = b->len;

    if (e->meta.ended && e->last_seq < sh->seq) {
        /* the end is stored with its last frame, not before it */
        e->meta.ended = 0;
    }

    ngx_pty_shm_unlock(sh);
}


/*
 * What it is goes with every batch of it: the row is made by the first
 * batch that commits, whichever worker's (and again in a file replaced
 * under a running session).  The caller locks.
 */
static ngx_int_t
ngx_pty_store_copy_meta(ngx_pty_store_batch_t *b, ngx_pty_store_entry_t *e)
{
    size_t                 meta;
    ngx_pty_session_sh_t  *sh;

    sh = e->sh;

    meta = ngx_align(sh->command_len + sh->acl_len, 8);

    if (b->len + meta > NGX_PTY_STORE_BYTES / 2) {
        b->more = 1;
        return NGX_DECLINED;
    }

    ngx_memcpy(e->meta.id, sh->id, NGX_PTY_ID_LEN);
    e->meta.name = sh->name;
    e->meta.started = (uint64_t) sh->created * 1000;
    e->meta.cols = sh->cols;
    e->meta.rows = sh->rows;
    e->meta.exit_code = sh->exit_code;
    e->meta.reason = sh->closed_reason;
    e->meta.ended = (sh->state >= NGX_PTY_STATE_CLOSED) ? sh->closed_at : 0;
    e->keep_frames = sh->params.replay_buffer_frames;
    e->keep_ms = (uint64_t) sh->params.replay_buffer_retention_seconds
                 * 1000;

    e->has_meta = 1;
    e->meta.command.data = b->data + b->len;
    e->meta.command.len = sh->command_len;
    ngx_memcpy(e->meta.command.data, sh->command, sh->command_len);

    e->meta.acl.data = e->meta.command.data + sh->command_len;
    e->meta.acl.len = sh->acl_len;
    ngx_memcpy(e->meta.acl.data, sh->acl, sh->acl_len);

    b->len += meta;
    e->start = b->len;

    return NGX_OK;
}


/*
 * Ring records from *off into the batch, NGX_PTY_STORE_CHUNK bytes at
 * most: NGX_AGAIN when there are more to copy, NGX_OK at the ring's head
 * or a full batch.  The caller locks.
 */
static ngx_int_t
ngx_pty_store_copy_frames(ngx_pty_store_batch_t *b, ngx_pty_store_entry_t *e,
    uint64_t *off)
{
    size_t            need, chunk;
    ngx_pty_frame_t  *f;

    chunk = 0;

    while ((f = ngx_pty_ring_read(e->sh->ring, off)) != NULL) {
        need = ngx_pty_ring_need(f->len);

        if (b->len + need > NGX_PTY_STORE_BYTES) {
            *off -= need;
            b->more = 1;
            return NGX_OK;
        }

        if (f->kind != NGX_PTY_FRAME_REVOKE) {
            ngx_memcpy(b->data + b->len, f, sizeof(ngx_pty_frame_t) + f->len);
            b->len += need;
        }

        e->last_seq = f->seq;
        chunk += need;

        if (chunk >= NGX_PTY_STORE_CHUNK) {
            return NGX_AGAIN;
        }
    }

    return NGX_OK;
}


static void
ngx_pty_store_write_thread(void *data, ngx_log_t *log)
{
    ngx_pty_store_batch_t  *b = data;

    b->rc = ngx_pty_store_write(b);
}


/* the batch in one transaction; runs in a pool thread (or the master) */
static ngx_int_t
ngx_pty_store_write(ngx_pty_store_batch_t *b)
{
    ngx_uint_t               i;
    ngx_pty_store_writer_t  *w;

    w = &ngx_pty_store_writer;

    if (w->db == NULL && ngx_pty_store_writer_open(w, b->err) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_pty_store_exec(w->db, "BEGIN IMMEDIATE", b->err) != NGX_OK) {
        goto failed;
    }

    for (i = 0; i < b->n; i++) {
        if (ngx_pty_store_write_entry(w, b, &b->entries[i]) != NGX_OK) {
            (void) sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
            goto failed;
        }
    }

    if (ngx_pty_store_exec(w->db, "COMMIT", b->err) != NGX_OK) {
        (void) sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
        goto failed;
    }

    ngx_pty_store_checkpoint(w, b);

    if (b->prune && ngx_pty_store_prune(w->db, b->err) == NGX_OK) {
        b->pruned = 1;
    }

    b->err[0] = '\0';

    return NGX_OK;

failed:

    /* a file replaced or repaired under it is opened again */
    ngx_pty_store_writer_close(w);

    return NGX_ERROR;
}


static int
ngx_pty_store_wal_hook(void *data, sqlite3 *db, const char *name, int pages)
{
    ngx_pty_store_writer_t  *w = data;

    w->wal_pages = pages;

    return SQLITE_OK;
}


/*
 * A checkpoint copies the WAL's pages into the file: during a flood (1 MiB
 * stored within the last one to two seconds, or a batch that left frames
 * behind) it waits until the output has calmed down, up to 64 MiB of WAL,
 * so that the flood's pages are not copied again while the flood still
 * needs the CPU
 */
static void
ngx_pty_store_checkpoint(ngx_pty_store_writer_t *w, ngx_pty_store_batch_t *b)
{
    ngx_uint_t  flood;

    flood = (b->more || b->flood);

    if (w->wal_pages < NGX_PTY_STORE_WAL_PAGES
        || (flood && w->wal_pages < NGX_PTY_STORE_WAL_MAX))
    {
        return;
    }

    /* passive: readers are not waited for; what they hold goes next time */
    if (sqlite3_wal_checkpoint_v2(w->db, NULL, SQLITE_CHECKPOINT_PASSIVE,
                                  NULL, NULL)
        == SQLITE_OK)
    {
        w->wal_pages = 0;
    }
}


static ngx_int_t
ngx_pty_store_write_entry(ngx_pty_store_writer_t *w, ngx_pty_store_batch_t *b,
    ngx_pty_store_entry_t *e)
{
    sqlite_int64              sid;
    ngx_pty_store_session_t  *m;

    m = &e->meta;

    if (!e->has_meta || (e->start == e->end && !m->ended && !e->gap_first)) {
        return NGX_OK;
    }

    if (ngx_pty_store_write_session(w, b, e, &sid) != NGX_OK
        || ngx_pty_store_write_frames(w, b, e, sid) != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (e->gap_first) {
        sqlite3_bind_int64(w->add_gap, 1, sid);
        sqlite3_bind_int64(w->add_gap, 2, e->gap_first);
        sqlite3_bind_int64(w->add_gap, 3, e->gap_last);
        sqlite3_bind_int64(w->add_gap, 4, ngx_pty_now_ms());

        if (ngx_pty_store_step(w->db, w->add_gap, "storing a gap", b->err)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    sqlite3_bind_int64(w->set_last, 1, e->last_seq);
    sqlite3_bind_int(w->set_last, 2, e->gap_first != 0);
    sqlite3_bind_int64(w->set_last, 3, sid);

    if (ngx_pty_store_step(w->db, w->set_last, "storing a session", b->err)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (m->ended == 0) {
        return NGX_OK;
    }

    sqlite3_bind_int64(w->set_end, 1, m->ended);

    if (m->exit_code >= 0) {
        sqlite3_bind_int64(w->set_end, 2, m->exit_code);

    } else {
        sqlite3_bind_null(w->set_end, 2);
    }

    sqlite3_bind_int(w->set_end, 3, m->reason);
    sqlite3_bind_int64(w->set_end, 4, sid);

    return ngx_pty_store_step(w->db, w->set_end, "storing a session's end",
                              b->err);
}


/* one statement run to its end, and made ready for the next */
static ngx_int_t
ngx_pty_store_step(sqlite3 *db, sqlite3_stmt *st, const char *what,
    u_char *err)
{
    int  rc;

    rc = sqlite3_step(st);

    if (rc != SQLITE_DONE) {
        ngx_pty_store_fail(db, what, err);
    }

    sqlite3_reset(st);

    return (rc == SQLITE_DONE) ? NGX_OK : NGX_ERROR;
}


/* the session's row, made by its first batch; its key in *sid */
static ngx_int_t
ngx_pty_store_write_session(ngx_pty_store_writer_t *w,
    ngx_pty_store_batch_t *b, ngx_pty_store_entry_t *e, sqlite_int64 *sid)
{
    ngx_pty_store_session_t  *m;

    m = &e->meta;

    sqlite3_bind_text(w->add_session, 1, (char *) m->id, NGX_PTY_ID_LEN,
                      SQLITE_STATIC);
    sqlite3_bind_int64(w->add_session, 2, m->name);

    if (ngx_pty_store_bind_command(w, m, b->err) != NGX_OK) {
        return NGX_ERROR;
    }

    sqlite3_bind_blob(w->add_session, 4, m->acl.data, m->acl.len,
                      SQLITE_STATIC);
    sqlite3_bind_int(w->add_session, 5, m->cols);
    sqlite3_bind_int(w->add_session, 6, m->rows);
    sqlite3_bind_int64(w->add_session, 7, m->started);
    sqlite3_bind_int64(w->add_session, 8, e->keep_frames);
    sqlite3_bind_int64(w->add_session, 9, e->keep_ms);

    if (ngx_pty_store_step(w->db, w->add_session, "storing a session",
                           b->err)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    sqlite3_bind_text(w->find_sid, 1, (char *) m->id, NGX_PTY_ID_LEN,
                      SQLITE_STATIC);

    if (sqlite3_step(w->find_sid) != SQLITE_ROW) {
        sqlite3_reset(w->find_sid);
        ngx_snprintf(b->err, 159, "session %*s is not in the archive%Z",
                     (size_t) NGX_PTY_ID_LEN, m->id);
        return NGX_ERROR;
    }

    *sid = sqlite3_column_int64(w->find_sid, 0);
    sqlite3_reset(w->find_sid);

    return NGX_OK;
}


static ngx_int_t
ngx_pty_store_write_frames(ngx_pty_store_writer_t *w,
    ngx_pty_store_batch_t *b, ngx_pty_store_entry_t *e, sqlite_int64 sid)
{
    u_char           *p, *end;
    ngx_pty_frame_t  *f;

    p = b->data + e->start;
    end = b->data + e->end;

    for ( /* void */ ; p < end; p += ngx_pty_ring_need(f->len)) {
        f = (ngx_pty_frame_t *) p;

        if (ngx_pty_store_bind_data(w, e->meta.id, f, b->err) != NGX_OK) {
            return NGX_ERROR;
        }

        sqlite3_bind_int64(w->add_frame, 1, sid);
        sqlite3_bind_int64(w->add_frame, 2, f->seq);
        sqlite3_bind_int64(w->add_frame, 3, f->ts);
        sqlite3_bind_int(w->add_frame, 4, f->kind);
        sqlite3_bind_int64(w->add_frame, 5, f->target);
        sqlite3_bind_int64(w->add_frame, 6, f->anchor);
        sqlite3_bind_int(w->add_frame, 7, f->cols);
        sqlite3_bind_int(w->add_frame, 8, f->rows);
        sqlite3_bind_blob(w->add_frame, 9, f->id, 16, SQLITE_STATIC);

        if (ngx_pty_store_step(w->db, w->add_frame, "storing a frame",
                               b->err)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/* the command line, sealed like a frame (sequence 0) with a key */
static ngx_int_t
ngx_pty_store_bind_command(ngx_pty_store_writer_t *w,
    ngx_pty_store_session_t *m, u_char *err)
{
    u_char               *p;
    size_t                size;
    ngx_pty_store_key_t  *k;

    if (ngx_pty_store_conf->keys == NULL
        || ngx_pty_store_conf->keys->nelts == 0)
    {
        sqlite3_bind_blob(w->add_session, 3, m->command.data, m->command.len,
                          SQLITE_STATIC);
        sqlite3_bind_int(w->add_session, 10, 0);
        return NGX_OK;
    }

    k = ngx_pty_store_conf->keys->elts;
    size = NGX_PTY_STORE_SEALED(m->command.len);

    p = malloc(size);
    if (p == NULL
        || ngx_pty_store_seal(k, m->id, 0, 0, m->command.data,
                              m->command.len, p)
           != NGX_OK)
    {
        free(p);
        ngx_snprintf(err, 159, "encrypting a command failed%Z");
        return NGX_ERROR;
    }

    sqlite3_bind_blob(w->add_session, 3, p, size, free);
    sqlite3_bind_int64(w->add_session, 10, k->id);

    return NGX_OK;
}


/* the frame's data, sealed with the first pty_archive_key if any */
static ngx_int_t
ngx_pty_store_bind_data(ngx_pty_store_writer_t *w, u_char *id,
    ngx_pty_frame_t *f, u_char *err)
{
    u_char               *p;
    size_t                size;
    ngx_pty_store_key_t  *k;

    if (ngx_pty_store_conf->keys == NULL
        || ngx_pty_store_conf->keys->nelts == 0)
    {
        sqlite3_bind_blob(w->add_frame, 10, ngx_pty_frame_data(f), f->len,
                          SQLITE_STATIC);
        sqlite3_bind_int(w->add_frame, 11, 0);
        return NGX_OK;
    }

    k = ngx_pty_store_conf->keys->elts;
    size = NGX_PTY_STORE_SEALED(f->len);

    if (size > w->sealed_size) {
        p = realloc(w->sealed, ngx_max(size, 65536));
        if (p == NULL) {
            ngx_snprintf(err, 159, "out of memory%Z");
            return NGX_ERROR;
        }

        w->sealed = p;
        w->sealed_size = ngx_max(size, 65536);
    }

    if (ngx_pty_store_seal(k, id, f->seq, f->kind, ngx_pty_frame_data(f),
                           f->len, w->sealed)
        != NGX_OK)
    {
        ngx_snprintf(err, 159, "encrypting a frame failed%Z");
        return NGX_ERROR;
    }

    sqlite3_bind_blob(w->add_frame, 10, w->sealed, size, SQLITE_STATIC);
    sqlite3_bind_int64(w->add_frame, 11, k->id);

    return NGX_OK;
}


/*
 * SQLite makes the journal files with the file's mode, and keeps them
 * while any connection is open: a file made read-only and then writable
 * again would stay unwritable through them.  They are the workers' own,
 * so they follow the file's mode again.
 */
static void
ngx_pty_store_journal_modes(void)
{
    u_char       name[NGX_MAX_PATH + 8];
    ngx_uint_t   i;
    struct stat  db, st;

    static const char  *suffix[] = { "-wal", "-shm" };

    ngx_snprintf(name, sizeof(name), "%V%Z", &ngx_pty_store_conf->path);

    if (stat((char *) name, &db) == -1 || !(db.st_mode & S_IWUSR)) {
        return;
    }

    for (i = 0; i < 2; i++) {
        ngx_snprintf(name, sizeof(name), "%V%s%Z",
                     &ngx_pty_store_conf->path, suffix[i]);

        if (stat((char *) name, &st) == 0 && st.st_uid == geteuid()
            && !(st.st_mode & S_IWUSR))
        {
            (void) chmod((char *) name, db.st_mode & 0666);
        }
    }
}


static ngx_int_t
ngx_pty_store_writer_open(ngx_pty_store_writer_t *w, u_char *err)
{
    ngx_pty_store_journal_modes();

    w->db = ngx_pty_store_open(&ngx_pty_store_conf->path,
                               SQLITE_OPEN_READWRITE, err);
    if (w->db == NULL) {
        return NGX_ERROR;
    }

    if (ngx_pty_store_migrate(w->db, err) != NGX_OK
        || ngx_pty_store_exec(w->db, "PRAGMA synchronous = NORMAL;"
                              "PRAGMA cache_size = -16384;"
                              "PRAGMA journal_size_limit = 67108864", err)
           != NGX_OK)
    {
        goto failed;
    }

    /* in place of SQLite's checkpoint at every 512 pages committed */
    w->wal_pages = 0;
    (void) sqlite3_wal_hook(w->db, ngx_pty_store_wal_hook, w);

    if (sqlite3_prepare_v2(w->db,
            "INSERT INTO sessions (id, name, command, acl, cols, rows,"
            " started, keep_frames, keep_ms, cmd_enc)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (id) DO NOTHING", -1, &w->add_session, NULL)
        != SQLITE_OK
        || sqlite3_prepare_v2(w->db,
               "SELECT sid FROM sessions WHERE id = ?", -1, &w->find_sid,
               NULL)
           != SQLITE_OK
        || sqlite3_prepare_v2(w->db,
               "INSERT OR IGNORE INTO frames (sid, seq, ts, kind, target,"
               " anchor, cols, rows, uuid, data, enc)"
               " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", -1, &w->add_frame,
               NULL)
           != SQLITE_OK
        || sqlite3_prepare_v2(w->db,
               "UPDATE sessions SET last_seq = max(last_seq, ?),"
               " gaps = gaps + ? WHERE sid = ?", -1, &w->set_last, NULL)
           != SQLITE_OK
        || sqlite3_prepare_v2(w->db,
               "UPDATE sessions SET ended = ?, exit_code = ?, reason = ?"
               " WHERE sid = ?", -1, &w->set_end, NULL)
           != SQLITE_OK
        || sqlite3_prepare_v2(w->db,
               "INSERT INTO gaps (sid, first, last, at) VALUES (?, ?, ?, ?)",
               -1, &w->add_gap, NULL)
           != SQLITE_OK)
    {
        ngx_pty_store_fail(w->db, "preparing", err);
        goto failed;
    }

    return NGX_OK;

failed:

    ngx_pty_store_writer_close(w);

    return NGX_ERROR;
}


static void
ngx_pty_store_writer_close(ngx_pty_store_writer_t *w)
{
    if (w->db == NULL) {
        return;
    }

    sqlite3_finalize(w->add_session);
    sqlite3_finalize(w->find_sid);
    sqlite3_finalize(w->add_frame);
    sqlite3_finalize(w->set_last);
    sqlite3_finalize(w->set_end);
    sqlite3_finalize(w->add_gap);
    sqlite3_close(w->db);
    free(w->sealed);

    ngx_memzero(w, sizeof(ngx_pty_store_writer_t));
}


/*
 * A fault is logged once for all workers, when it starts and when its
 * reason changes, and its end once: the zone holds a hash of the reason.
 */
static void
ngx_pty_store_episode(ngx_log_t *log, u_char *err)
{
    u_char            *p;
    uint32_t           hash;
    ngx_pty_zone_t    *zone;
    ngx_atomic_uint_t  old;

    zone = ngx_pty_shm_zone();
    old = zone->sh->arch_failing;

    if (err == NULL) {
        if (old && ngx_atomic_cmp_set(&zone->sh->arch_failing, old, 0)) {
            ngx_log_error(NGX_LOG_NOTICE, log, 0,
                          "pty: archive \"%V\" is written again",
                          &ngx_pty_store_conf->path);
        }

        return;
    }

    /* the reason, not the step that met it ("storing a frame: ...") */
    p = (u_char *) ngx_strstr(err, ": ");
    p = p ? p + 2 : err;
    hash = ngx_murmur_hash2(p, ngx_strlen(p)) | 1;

    if (old != hash
        && ngx_atomic_cmp_set(&zone->sh->arch_failing, old, hash))
    {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "pty: archive \"%V\" cannot be written: %s; "
                      "terminals go on, and what the rings still hold "
                      "is stored when it can be",
                      &ngx_pty_store_conf->path, err);
    }
}


static void
ngx_pty_store_write_done(ngx_event_t *ev)
{
    ngx_thread_task_t      *task = ev->data;
    ngx_pty_store_batch_t  *b = task->ctx;

    ngx_pty_store_busy = 0;

    if (b->rc == NGX_OK) {
        ngx_pty_store_episode(ev->log, NULL);
        ngx_pty_store_backoff = 0;
        ngx_pty_store_commit(b, ev->log);

    } else {
        ngx_pty_store_episode(ev->log, b->err);
        ngx_pty_store_backoff = ngx_min(ngx_pty_store_backoff
                                        ? ngx_pty_store_backoff * 2 : 500,
                                        NGX_PTY_STORE_BACKOFF);
        ngx_pty_store_commit(b, NULL);
    }

    if (b->rc == NGX_OK && (b->more || ngx_pty_store_again)) {
        ngx_add_timer(&ngx_pty_store_timer,
                      (b->more || ngx_pty_store_again > 1)
                      ? 1 : ngx_pty_store_conf->batch);
        ngx_pty_store_again = 0;

    } else if (b->rc != NGX_OK) {
        ngx_pty_store_again = 0;
        ngx_add_timer(&ngx_pty_store_timer, ngx_pty_store_backoff);
    }

    ngx_pty_store_batch_free(b);
    ngx_free(task);
}


/*
 * The cursors move past what was stored (log NULL: nothing was), the
 * claims are given back, and an ended session all stored gives its ring
 * back to the zone.
 */
static void
ngx_pty_store_commit(ngx_pty_store_batch_t *b, ngx_log_t *log)
{
    ngx_uint_t              i, compact;
    ngx_pty_zone_t         *zone;
    ngx_pty_session_sh_t   *sh;
    ngx_pty_store_entry_t  *e, *lagged;

    lagged = NULL;

    for (i = 0; i < b->n; i++) {
        e = &b->entries[i];
        sh = e->sh;
        compact = 0;

        ngx_pty_shm_lock(sh);

        if (log) {
            if (e->last_seq > sh->arch_seq) {
                sh->arch_seq = e->last_seq;
                sh->ring->stored = e->next_off;
            }

            if (e->meta.ended) {
                sh->arch_ended = 1;
            }

            compact = (sh->state == NGX_PTY_STATE_CLOSED
                       && sh->arch_seq == sh->seq
                       && ngx_queue_empty(&sh->members));

            if (e->gap_first && lagged == NULL) {
                lagged = e;
            }
        }

        (void) ngx_atomic_cmp_set(&sh->arch_claim,
                                  (ngx_atomic_uint_t) ngx_pid, 0);

        ngx_pty_shm_unlock(sh);

        if (compact) {
            ngx_pty_shm_session_compact(sh);
        }

        ngx_pty_shm_session_release(sh);
    }

    if (log == NULL) {
        return;
    }

    /* falling behind is said once for all workers, until a batch has no gap */
    zone = ngx_pty_shm_zone();

    if (lagged == NULL) {
        zone->sh->arch_lagging = 0;

    } else if (ngx_atomic_cmp_set(&zone->sh->arch_lagging, 0, 1)) {
        ngx_log_error(NGX_LOG_WARN, log, 0,
                      "pty: archive fell behind the ring of session pty-%ui: "
                      "frames %uL to %uL were not stored (recorded as a gap)",
                      lagged->meta.name, lagged->gap_first, lagged->gap_last);
    }
}


static void
ngx_pty_store_batch_free(ngx_pty_store_batch_t *b)
{
    ngx_free(b);
}


/*
 * Ended sessions kept past keep_closed go, frames of running sessions
 * older than both their frame count and their retention time go, and
 * while the file holds more than max_size the ended sessions that ended
 * first go.  Freed pages go back to the file system.
 */
static ngx_int_t
ngx_pty_store_prune(sqlite3 *db, u_char *err)
{
    u_char         sql[256];
    uint64_t       now;
    sqlite3_stmt  *st;
    sqlite_int64   used;

    now = ngx_pty_now_ms();

    ngx_snprintf(sql, sizeof(sql),
                 "DELETE FROM frames WHERE sid IN (SELECT sid FROM sessions"
                 " WHERE ended < %uL);"
                 "DELETE FROM gaps WHERE sid IN (SELECT sid FROM sessions"
                 " WHERE ended < %uL);"
                 "DELETE FROM sessions WHERE ended < %uL;%Z",
                 now - (uint64_t) ngx_pty_store_conf->keep_closed * 1000,
                 now - (uint64_t) ngx_pty_store_conf->keep_closed * 1000,
                 now - (uint64_t) ngx_pty_store_conf->keep_closed * 1000);

    if (ngx_pty_store_exec(db, "BEGIN IMMEDIATE", err) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_pty_store_exec(db, (char *) sql, err) != NGX_OK) {
        goto failed;
    }

    if (ngx_pty_store_prune_running(db, now, err) != NGX_OK) {
        goto failed;
    }

    while (ngx_pty_store_conf->max_size) {
        if (sqlite3_prepare_v2(db,
                "SELECT (page_count - freelist_count) * page_size"
                " FROM pragma_page_count, pragma_freelist_count,"
                " pragma_page_size", -1, &st, NULL)
            != SQLITE_OK
            || sqlite3_step(st) != SQLITE_ROW)
        {
            sqlite3_finalize(st);
            ngx_pty_store_fail(db, "measuring", err);
            goto failed;
        }

        used = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);

        if (used <= ngx_pty_store_conf->max_size) {
            break;
        }

        if (ngx_pty_store_exec(db,
                "CREATE TEMP TABLE IF NOT EXISTS oldest (sid INTEGER);"
                "DELETE FROM oldest;"
                "INSERT INTO oldest SELECT sid FROM sessions"
                " WHERE ended IS NOT NULL ORDER BY ended LIMIT 4;"
                "DELETE FROM frames WHERE sid IN (SELECT sid FROM oldest);"
                "DELETE FROM gaps WHERE sid IN (SELECT sid FROM oldest);"
                "DELETE FROM sessions WHERE sid IN (SELECT sid FROM oldest)",
                err)
            != NGX_OK)
        {
            goto failed;
        }

        if (sqlite3_changes(db) == 0) {
            /* only running sessions are left: they keep their promise */
            break;
        }
    }

    if (ngx_pty_store_exec(db, "COMMIT", err) != NGX_OK) {
        goto failed;
    }

    return ngx_pty_store_exec(db, "PRAGMA incremental_vacuum", err);

failed:

    (void) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);

    return NGX_ERROR;
}


/*
 * A running session's frames older than both its count and its time, one
 * session at a time: each delete walks only the key range it deletes.
 */
static ngx_int_t
ngx_pty_store_prune_running(sqlite3 *db, uint64_t now, u_char *err)
{
    int            rc;
    sqlite3_stmt  *sel, *del;
    sqlite_int64   last, keep;

    sel = NULL;
    del = NULL;

    if (sqlite3_prepare_v2(db, "SELECT sid, last_seq, keep_frames, keep_ms"
                           " FROM sessions WHERE ended IS NULL", -1, &sel,
                           NULL)
        != SQLITE_OK
        || sqlite3_prepare_v2(db, "DELETE FROM frames WHERE sid = ?"
                              " AND seq <= ? AND ts < ?", -1, &del, NULL)
           != SQLITE_OK)
    {
        ngx_pty_store_fail(db, "pruning", err);
        sqlite3_finalize(sel);
        return NGX_ERROR;
    }

    rc = SQLITE_DONE;

    while (sqlite3_step(sel) == SQLITE_ROW) {
        last = sqlite3_column_int64(sel, 1);
        keep = sqlite3_column_int64(sel, 2);

        if (last <= keep) {
            continue;
        }

        sqlite3_bind_int64(del, 1, sqlite3_column_int64(sel, 0));
        sqlite3_bind_int64(del, 2, last - keep);
        sqlite3_bind_int64(del, 3, now - sqlite3_column_int64(sel, 3));

        rc = sqlite3_step(del);
        sqlite3_reset(del);

        if (rc != SQLITE_DONE) {
            ngx_pty_store_fail(db, "pruning", err);
            break;
        }
    }

    sqlite3_finalize(sel);
    sqlite3_finalize(del);

    return (rc == SQLITE_DONE) ? NGX_OK : NGX_ERROR;
}


/*
 * nginx stops: the workers are gone, and their last frames (and the
 * Closed of each session the master just ended) are stored here, in the
 * master, which serves nobody.  Bounded: a locked or failing file ends
 * it, logged once.
 */
void
ngx_pty_store_exit_master(ngx_cycle_t *cycle)
{
    ngx_uint_t              rounds;
    ngx_pty_store_batch_t  *b;

    if (ngx_pty_store_conf == NULL) {
        return;
    }

    for (rounds = 0; rounds < 1024; rounds++) {
        b = ngx_pty_store_collect();
        if (b == NULL) {
            break;
        }

        b->prune = 0;
        b->rc = ngx_pty_store_write(b);

        if (b->rc != NGX_OK) {
            ngx_log_error(NGX_LOG_ERR, cycle->log, 0,
                          "pty: archive \"%V\": %s; the last frames of "
                          "this run are not stored",
                          &ngx_pty_store_conf->path, b->err);
            ngx_pty_store_commit(b, NULL);
            ngx_pty_store_batch_free(b);
            break;
        }

        ngx_pty_store_commit(b, cycle->log);
        ngx_pty_store_batch_free(b);
    }

    ngx_pty_store_writer_close(&ngx_pty_store_writer);
}


ngx_pty_store_read_t *
ngx_pty_store_read_create(ngx_log_t *log)
{
    ngx_pty_store_read_t  *rd;

    rd = ngx_calloc(sizeof(ngx_pty_store_read_t), log);
    if (rd == NULL) {
        return NULL;
    }

    rd->log = log;
    rd->limit = 1000;

    return rd;
}


void
ngx_pty_store_read_free(ngx_pty_store_read_t *rd)
{
    ngx_uint_t  i;

    for (i = 0; i < rd->nsessions; i++) {
        ngx_free(rd->sessions[i].command.data);
        ngx_free(rd->sessions[i].acl.data);
    }

    ngx_free(rd->sessions);
    ngx_free(rd->key.data);
    ngx_free(rd->session.command.data);
    ngx_free(rd->session.acl.data);
    ngx_free(rd->frames);
    ngx_free(rd->settled.data);
    ngx_free(rd);
}


ngx_int_t
ngx_pty_store_read_post(ngx_pty_store_read_t *rd)
{
    u_char             *key;
    ngx_thread_task_t  *task;

    if (ngx_pty_store_conf == NULL) {
        return NGX_ERROR;
    }

    /* the caller's key may live in a pool that goes before the thread */
    key = ngx_alloc(rd->key.len + 1, rd->log);
    if (key == NULL) {
        /* the caller frees the read, which must not free its key */
        ngx_str_null(&rd->key);
        return NGX_ERROR;
    }

    if (rd->key.len) {
        ngx_memcpy(key, rd->key.data, rd->key.len);
    }

    key[rd->key.len] = '\0';
    rd->key.data = key;

    task = ngx_calloc(sizeof(ngx_thread_task_t), rd->log);
    if (task == NULL) {
        return NGX_ERROR;
    }

    task->ctx = rd;
    task->handler = ngx_pty_store_read_thread;
    task->event.handler = ngx_pty_store_read_done;
    task->event.data = task;
    task->event.log = rd->log;

    if (ngx_thread_task_post(ngx_pty_store_conf->pool, task) != NGX_OK) {
        ngx_free(task);
        return NGX_ERROR;
    }

    return NGX_OK;
}


static void
ngx_pty_store_read_done(ngx_event_t *ev)
{
    ngx_thread_task_t     *task = ev->data;
    ngx_pty_store_read_t  *rd = task->ctx;

    ngx_free(task);

    if (!rd->cancelled) {
        rd->handler(rd);
    }

    ngx_pty_store_read_free(rd);
}


static void
ngx_pty_store_read_thread(void *data, ngx_log_t *log)
{
    ngx_pty_store_read_t  *rd = data;

    sqlite3  *db;

    db = ngx_pty_store_open(&ngx_pty_store_conf->path, SQLITE_OPEN_READONLY,
                            rd->err);
    if (db == NULL) {
        rd->rc = NGX_ERROR;
        return;
    }

    /* one snapshot: a pruning between its queries must not show */
    if (ngx_pty_store_exec(db, "BEGIN", rd->err) != NGX_OK) {
        rd->rc = NGX_ERROR;

    } else {
        rd->rc = rd->list ? ngx_pty_store_read_list(db, rd)
                 : rd->scroll ? ngx_pty_store_read_scroll(db, rd)
                 : ngx_pty_store_read_session(db, rd);
        (void) sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    }

    sqlite3_close(db);
}


static ngx_int_t
ngx_pty_store_read_session(sqlite3 *db, ngx_pty_store_read_t *rd)
{
    int                       rc;
    ngx_int_t                 n;
    sqlite3_stmt             *st;
    sqlite_int64              sid;
    ngx_pty_store_session_t  *m;

    m = &rd->session;

    if (rd->key.len > 4 && ngx_strncmp(rd->key.data, "pty-", 4) == 0) {
        n = ngx_atoi(rd->key.data + 4, rd->key.len - 4);

        rc = sqlite3_prepare_v2(db, "SELECT " NGX_PTY_STORE_COLUMNS
                                " FROM sessions WHERE name = ?"
                                " ORDER BY started DESC LIMIT 1",
                                -1, &st, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_int64(st, 1, n);
        }

    } else {
        rc = sqlite3_prepare_v2(db, "SELECT " NGX_PTY_STORE_COLUMNS
                                " FROM sessions WHERE id = ?", -1, &st, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_text(st, 1, (char *) rd->key.data, rd->key.len,
                              SQLITE_STATIC);
        }
    }

    if (rc != SQLITE_OK) {
        ngx_pty_store_fail(db, "reading", rd->err);
        return NGX_ERROR;
    }

    rc = sqlite3_step(st);

    if (rc != SQLITE_ROW) {
        if (rc != SQLITE_DONE) {
            ngx_pty_store_fail(db, "reading", rd->err);
        }

        sqlite3_finalize(st);
        return (rc == SQLITE_DONE) ? NGX_DECLINED : NGX_ERROR;
    }

    sid = sqlite3_column_int64(st, 0);

    if (ngx_pty_store_row(st, m, rd) != NGX_OK) {
        sqlite3_finalize(st);
        return NGX_ERROR;
    }

    sqlite3_finalize(st);

    if (ngx_pty_store_read_frames(db, sid, rd) != NGX_OK) {
        return NGX_ERROR;
    }

    if (rd->text && ngx_pty_store_read_text(db, sid, rd) != NGX_OK) {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* a row of sessions (NGX_PTY_STORE_COLUMNS) as the archive's session */
static ngx_int_t
ngx_pty_store_row(sqlite3_stmt *st, ngx_pty_store_session_t *m,
    ngx_pty_store_read_t *rd)
{
    size_t  len;

    len = ngx_min((size_t) sqlite3_column_bytes(st, 1), NGX_PTY_ID_LEN);
    ngx_memcpy(m->id, sqlite3_column_text(st, 1), len);

    m->name = sqlite3_column_int64(st, 2);

    m->command.len = sqlite3_column_bytes(st, 3);
    m->command.data = ngx_alloc(m->command.len + 1, rd->log);
    m->acl.len = sqlite3_column_bytes(st, 4);
    m->acl.data = ngx_alloc(m->acl.len + 1, rd->log);

    if (m->command.data == NULL || m->acl.data == NULL) {
        ngx_snprintf(rd->err, 159, "out of memory%Z");
        return NGX_ERROR;
    }

    if (m->command.len == 0) {
        /* void */

    } else if (sqlite3_column_int64(st, 13) == 0) {
        ngx_memcpy(m->command.data, sqlite3_column_blob(st, 3),
                   m->command.len);

    } else if (ngx_pty_store_unseal(m->id, 0, 0, sqlite3_column_int64(st, 13),
                                    sqlite3_column_blob(st, 3),
                                    m->command.len, m->command.data, rd->err)
               != NGX_OK)
    {
        return NGX_ERROR;

    } else {
        m->command.len -= NGX_PTY_STORE_SEALED(0);
    }

    if (m->acl.len) {
        ngx_memcpy(m->acl.data, sqlite3_column_blob(st, 4), m->acl.len);
    }

    m->cols = sqlite3_column_int(st, 5);
    m->rows = sqlite3_column_int(st, 6);
    m->started = sqlite3_column_int64(st, 7);
    m->ended = sqlite3_column_int64(st, 8);
    m->exit_code = (sqlite3_column_type(st, 9) == SQLITE_NULL)
                   ? -1 : sqlite3_column_int64(st, 9);
    m->reason = sqlite3_column_int(st, 10);
    m->last_seq = sqlite3_column_int64(st, 11);
    m->gaps = sqlite3_column_int(st, 12);

    return NGX_OK;
}


/* the ended sessions, newest first, for the list call */
static ngx_int_t
ngx_pty_store_read_list(sqlite3 *db, ngx_pty_store_read_t *rd)
{
    sqlite3_stmt  *st;

    rd->sessions = ngx_calloc(rd->list * sizeof(ngx_pty_store_session_t),
                              rd->log);
    if (rd->sessions == NULL) {
        ngx_snprintf(rd->err, 159, "out of memory%Z");
        return NGX_ERROR;
    }

    if (sqlite3_prepare_v2(db, "SELECT " NGX_PTY_STORE_COLUMNS
                           " FROM sessions WHERE ended IS NOT NULL"
                           " ORDER BY started DESC LIMIT ?", -1, &st, NULL)
        != SQLITE_OK)
    {
        ngx_pty_store_fail(db, "reading", rd->err);
        return NGX_ERROR;
    }

    sqlite3_bind_int64(st, 1, rd->list);

    while (rd->nsessions < rd->list && sqlite3_step(st) == SQLITE_ROW) {
        if (ngx_pty_store_row(st, &rd->sessions[rd->nsessions++], rd)
            != NGX_OK)
        {
            sqlite3_finalize(st);
            return NGX_ERROR;
        }
    }

    sqlite3_finalize(st);

    return NGX_OK;
}


/*
 * A session's raw output from scrollback offset rd->from on, rd->scroll
 * bytes at most, for the agent reader that lost it from the zone: the
 * Output frames from the one holding that offset, as long as they follow
 * each other without a gap.  rd->next is the offset of the first byte.
 */
static ngx_int_t
ngx_pty_store_read_scroll(sqlite3 *db, ngx_pty_store_read_t *rd)
{
    u_char        *p, *data;
    size_t         len, skip;
    uint64_t       anchor, end;
    sqlite3_stmt  *st;

    rd->frames = ngx_alloc(rd->scroll, rd->log);
    data = ngx_alloc(NGX_PTY_STORE_SEALED(65536), rd->log);

    if (rd->frames == NULL || data == NULL) {
        ngx_free(data);
        ngx_snprintf(rd->err, 159, "out of memory%Z");
        return NGX_ERROR;
    }

    if (sqlite3_prepare_v2(db, "SELECT f.seq, f.anchor, f.data, f.enc"
                           " FROM sessions s JOIN frames f ON f.sid = s.sid"
                           " WHERE s.id = ?1 AND f.kind = ?2 AND f.seq >="
                           " (SELECT max(g.seq) FROM frames g"
                           " WHERE g.sid = s.sid AND g.kind = ?2"
                           " AND g.anchor <= ?3)"
                           " ORDER BY f.seq", -1, &st, NULL)
        != SQLITE_OK)
    {
        ngx_free(data);
        ngx_pty_store_fail(db, "reading", rd->err);
        return NGX_ERROR;
    }

    sqlite3_bind_text(st, 1, (char *) rd->key.data, rd->key.len,
                      SQLITE_STATIC);
    sqlite3_bind_int(st, 2, NGX_PTY_FRAME_OUTPUT);
    sqlite3_bind_int64(st, 3, rd->from);

    end = 0;

    while (rd->frames_len < rd->scroll && sqlite3_step(st) == SQLITE_ROW) {
        anchor = sqlite3_column_int64(st, 1);
        len = sqlite3_column_bytes(st, 2);
        p = (u_char *) sqlite3_column_blob(st, 2);

        if (end && anchor != end) {
            break;          /* a gap the archive recorded */
        }

        if (sqlite3_column_int64(st, 3)) {
            if (len > NGX_PTY_STORE_SEALED(65536)
                || ngx_pty_store_unseal(rd->key.data,
                                        sqlite3_column_int64(st, 0),
                                        NGX_PTY_FRAME_OUTPUT,
                                        sqlite3_column_int64(st, 3), p, len,
                                        data, rd->err)
                   != NGX_OK)
            {
                break;
            }

            p = data;
            len -= NGX_PTY_STORE_SEALED(0);
        }

        end = anchor + len;

        if (end <= rd->from) {
            continue;
        }

        skip = (anchor < rd->from) ? rd->from - anchor : 0;

        if (rd->frames_len == 0) {
            rd->next = anchor + skip;
        }

        len = ngx_min(len - skip, rd->scroll - rd->frames_len);
        ngx_memcpy(rd->frames + rd->frames_len, p + skip, len);
        rd->frames_len += len;
    }

    sqlite3_finalize(st);
    ngx_free(data);

    return NGX_OK;
}


/* the frames from rd->from on, as ring records, and the oldest kept */
static ngx_int_t
ngx_pty_store_read_frames(sqlite3 *db, sqlite_int64 sid,
    ngx_pty_store_read_t *rd)
{
    u_char           *p;
    size_t            len, size, need;
    sqlite3_stmt     *st;
    ngx_pty_frame_t  *f;

    if (sqlite3_prepare_v2(db, "SELECT min(seq) FROM frames WHERE sid = ?",
                           -1, &st, NULL)
        != SQLITE_OK)
    {
        ngx_pty_store_fail(db, "reading", rd->err);
        return NGX_ERROR;
    }

    sqlite3_bind_int64(st, 1, sid);

    if (sqlite3_step(st) == SQLITE_ROW) {
        rd->session.first_seq = sqlite3_column_int64(st, 0);
    }

    sqlite3_finalize(st);

    if (rd->tail && ngx_pty_store_tail(db, sid, rd) != NGX_OK) {
        return NGX_ERROR;
    }

    if (rd->limit == 0) {
        return NGX_OK;
    }

    if (sqlite3_prepare_v2(db, "SELECT seq, ts, kind, target, anchor, cols,"
                           " rows, uuid, data, enc FROM frames"
                           " WHERE sid = ? AND seq >= ? ORDER BY seq"
                           " LIMIT ?", -1, &st, NULL)
        != SQLITE_OK)
    {
        ngx_pty_store_fail(db, "reading", rd->err);
        return NGX_ERROR;
    }

    sqlite3_bind_int64(st, 1, sid);
    sqlite3_bind_int64(st, 2, rd->from);
    sqlite3_bind_int64(st, 3, rd->limit + 1);

    size = 0;

    while (sqlite3_step(st) == SQLITE_ROW) {
        len = sqlite3_column_bytes(st, 8);
        need = ngx_pty_ring_need(len);

        if (rd->nframes == rd->limit
            || (rd->nframes && rd->frames_len + need > NGX_PTY_STORE_READ_MAX))
        {
            rd->next = sqlite3_column_int64(st, 0);
            break;
        }

        if (rd->frames_len + need > size) {
            size = ngx_max(size * 2, rd->frames_len + need);
            size = ngx_max(size, 65536);

            p = realloc(rd->frames, size);
            if (p == NULL) {
                sqlite3_finalize(st);
                ngx_snprintf(rd->err, 159, "out of memory%Z");
                return NGX_ERROR;
            }

            rd->frames = p;
        }

        f = (ngx_pty_frame_t *) (rd->frames + rd->frames_len);

        if (ngx_pty_store_frame_row(st, rd, f) != NGX_OK) {
            sqlite3_finalize(st);
            return NGX_ERROR;
        }

        /* a sealed row's record is its clear data's size */
        rd->frames_len += ngx_pty_ring_need(f->len);
        rd->nframes++;
    }

    sqlite3_finalize(st);

    return NGX_OK;
}


/* where the tail starts: the last Keyframe for every client, or frame 1 */
static ngx_int_t
ngx_pty_store_tail(sqlite3 *db, sqlite_int64 sid, ngx_pty_store_read_t *rd)
{
    uint64_t       seq, anchor;
    sqlite3_stmt  *st;

    if (sqlite3_prepare_v2(db, "SELECT seq, anchor FROM frames WHERE sid = ?"
                           " AND kind = ? AND target = 0 ORDER BY seq DESC"
                           " LIMIT 1", -1, &st, NULL)
        != SQLITE_OK)
    {
        ngx_pty_store_fail(db, "reading", rd->err);
        return NGX_ERROR;
    }

    sqlite3_bind_int64(st, 1, sid);
    sqlite3_bind_int(st, 2, NGX_PTY_FRAME_KEYFRAME);

    rd->from = 0;

    if (sqlite3_step(st) == SQLITE_ROW) {
        seq = sqlite3_column_int64(st, 0);
        anchor = sqlite3_column_int64(st, 1);

        /* the Output after its anchor may come before it */
        rd->from = (anchor && anchor < seq) ? anchor + 1 : seq;
    }

    sqlite3_finalize(st);

    return NGX_OK;
}


/* a row of frames (seq .. enc) as a ring record at f, opened if sealed */
static ngx_int_t
ngx_pty_store_frame_row(sqlite3_stmt *st, ngx_pty_store_read_t *rd,
    ngx_pty_frame_t *f)
{
    size_t  len;

    len = sqlite3_column_bytes(st, 8);

    ngx_memzero(f, sizeof(ngx_pty_frame_t));

    f->seq = sqlite3_column_int64(st, 0);
    f->ts = sqlite3_column_int64(st, 1);
    f->kind = sqlite3_column_int(st, 2);
    f->target = sqlite3_column_int64(st, 3);
    f->anchor = sqlite3_column_int64(st, 4);
    f->cols = sqlite3_column_int(st, 5);
    f->rows = sqlite3_column_int(st, 6);
    f->len = len;

    if (sqlite3_column_bytes(st, 7) == 16) {
        ngx_memcpy(f->id, sqlite3_column_blob(st, 7), 16);
    }

    if (sqlite3_column_int64(st, 9) == 0) {
        if (len) {
            ngx_memcpy(ngx_pty_frame_data(f), sqlite3_column_blob(st, 8),
                       len);
        }

        return NGX_OK;
    }

    if (ngx_pty_store_unseal(rd->session.id, f->seq, f->kind,
                             sqlite3_column_int64(st, 9),
                             sqlite3_column_blob(st, 8), len,
                             ngx_pty_frame_data(f), rd->err)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    f->len = len - NGX_PTY_STORE_SEALED(0);

    return NGX_OK;
}


/* the settled text of all the session's Output that is kept */
static ngx_int_t
ngx_pty_store_read_text(sqlite3 *db, sqlite_int64 sid,
    ngx_pty_store_read_t *rd)
{
    ngx_int_t             rc;
    ngx_pty_text_t       *t;
    ngx_pty_text_view_t   v;

    t = ngx_pty_text_create(NGX_PTY_STORE_READ_MAX);
    if (t == NULL) {
        ngx_snprintf(rd->err, 159, "out of memory%Z");
        return NGX_ERROR;
    }

    if (ngx_pty_store_feed_text(db, sid, rd, t) != NGX_OK) {
        ngx_pty_text_destroy(t);
        return NGX_ERROR;
    }

    rc = NGX_OK;

    if (ngx_pty_text_take(t, &v) == 0) {
        rd->settled.data = ngx_alloc(v.len + 1, rd->log);

        if (rd->settled.data) {
            ngx_memcpy(rd->settled.data, v.data, v.len);
            rd->settled.len = v.len;

        } else {
            rc = NGX_ERROR;
        }

    } else {
        rc = NGX_ERROR;
    }

    if (rc != NGX_OK) {
        ngx_snprintf(rd->err, 159, "out of memory%Z");
    }

    ngx_pty_text_destroy(t);

    return rc;
}


/* every Output row of the session into the converter, opened if sealed */
static ngx_int_t
ngx_pty_store_feed_text(sqlite3 *db, sqlite_int64 sid,
    ngx_pty_store_read_t *rd, ngx_pty_text_t *t)
{
    u_char        *buf, *p;
    size_t         len;
    ngx_int_t      rc;
    sqlite3_stmt  *st;

    if (sqlite3_prepare_v2(db, "SELECT seq, data, enc FROM frames"
                           " WHERE sid = ? AND kind = ? ORDER BY seq",
                           -1, &st, NULL)
        != SQLITE_OK)
    {
        ngx_pty_store_fail(db, "reading", rd->err);
        return NGX_ERROR;
    }

    sqlite3_bind_int64(st, 1, sid);
    sqlite3_bind_int(st, 2, NGX_PTY_FRAME_OUTPUT);

    rc = NGX_OK;
    buf = NULL;

    while (rc == NGX_OK && sqlite3_step(st) == SQLITE_ROW) {
        len = sqlite3_column_bytes(st, 1);

        if (sqlite3_column_int64(st, 2) == 0) {
            (void) ngx_pty_text_feed(t, sqlite3_column_blob(st, 1), len);
            continue;
        }

        p = realloc(buf, ngx_max(len, 64));

        if (p == NULL) {
            ngx_snprintf(rd->err, 159, "out of memory%Z");
            rc = NGX_ERROR;
            break;
        }

        buf = p;

        rc = ngx_pty_store_unseal(rd->session.id, sqlite3_column_int64(st, 0),
                                  NGX_PTY_FRAME_OUTPUT,
                                  sqlite3_column_int64(st, 2),
                                  sqlite3_column_blob(st, 1), len, buf,
                                  rd->err);

        if (rc == NGX_OK) {
            (void) ngx_pty_text_feed(t, buf, len - NGX_PTY_STORE_SEALED(0));
        }
    }

    free(buf);
    sqlite3_finalize(st);

    return rc;
}


#else /* !NGX_THREADS */

/*
 * Without thread pools nginx has nowhere to run SQLite off its event
 * loops: the archive is refused at configuration, and the rest of the
 * module runs without it.
 */

char *
ngx_pty_store_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    return "needs nginx built with --with-threads";
}


char *
ngx_pty_store_key_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    return "needs nginx built with --with-threads";
}


ngx_int_t
ngx_pty_store_init_module(ngx_cycle_t *cycle)
{
    return NGX_OK;
}


ngx_int_t
ngx_pty_store_init_process(ngx_cycle_t *cycle)
{
    return NGX_OK;
}


void
ngx_pty_store_exit_process(ngx_cycle_t *cycle)
{
}


void
ngx_pty_store_exit_master(ngx_cycle_t *cycle)
{
}


ngx_uint_t
ngx_pty_store_enabled(void)
{
    return 0;
}


void
ngx_pty_store_note(ngx_pty_session_sh_t *sh)
{
}


ngx_pty_store_read_t *
ngx_pty_store_read_create(ngx_log_t *log)
{
    return ngx_calloc(sizeof(ngx_pty_store_read_t), log);
}


ngx_int_t
ngx_pty_store_read_post(ngx_pty_store_read_t *rd)
{
    return NGX_ERROR;
}


void
ngx_pty_store_read_free(ngx_pty_store_read_t *rd)
{
    ngx_free(rd);
}

#endif
