
/*
 * The shared zone: session table, frame rings, membership.
 */

#include "ngx_pty.h"
#include "ngx_pty_shm.h"
#include "ngx_pty_reveal.h"
#include "ngx_pty_util.h"


static ngx_pty_zone_t          ngx_pty_zone;
static ngx_pty_shm_reclaim_pt  ngx_pty_shm_reclaimer;

/* what an ended session's compacted ring has room for besides what it
 * keeps: a late joiner's RoleAssigned and MembershipChanged */
#define NGX_PTY_RING_SPARE     512
#define NGX_PTY_SCROLL_MIN     64
#define NGX_PTY_SCROLL_TAIL    16384   /* an ended session's unread output
                                          kept when the zone is pressed */


static void ngx_pty_scroll_reserve(ngx_pty_session_sh_t *s, size_t scroll);
static ngx_uint_t ngx_pty_shm_pressed(void);
static ngx_pty_session_sh_t *ngx_pty_shm_find_by_name(ngx_uint_t name);
static ngx_pty_session_sh_t *ngx_pty_shm_find_by_id(u_char *id);
static ngx_pty_session_sh_t *ngx_pty_shm_session_alloc(ngx_log_t *log,
    ngx_str_t *command, ngx_str_t *acl, ngx_uint_t cols, ngx_uint_t rows,
    size_t scroll_size, size_t inbox_max);
static void ngx_pty_shm_link_locked(ngx_pty_session_sh_t *s,
    ngx_uint_t name);
static ngx_int_t ngx_pty_shm_restore_frames(ngx_pty_session_sh_t *s,
    u_char *p, size_t len);
static void ngx_pty_shm_free_locked(ngx_slab_pool_t *shpool,
    ngx_pty_session_sh_t *s);


/* ordered by the id's hash, then by the id: a lookup finds any of equals */
static void
ngx_pty_shm_rbtree_insert(ngx_rbtree_node_t *temp, ngx_rbtree_node_t *node,
    ngx_rbtree_node_t *sentinel)
{
    ngx_rbtree_node_t  **p;

    for ( ;; ) {
        if (node->key != temp->key) {
            p = (node->key < temp->key) ? &temp->left : &temp->right;

        } else {
            p = (ngx_strncasecmp(((ngx_pty_session_sh_t *) node)->id,
                                 ((ngx_pty_session_sh_t *) temp)->id,
                                 NGX_PTY_ID_LEN) < 0)
                ? &temp->left : &temp->right;
        }

        if (*p == sentinel) {
            break;
        }

        temp = *p;
    }

    *p = node;
    node->parent = temp;
    node->left = sentinel;
    node->right = sentinel;
    ngx_rbt_red(node);
}


ngx_int_t
ngx_pty_shm_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_pty_shm_t    *osh = data;

    ngx_slab_pool_t  *shpool;
    ngx_pty_shm_t    *sh;

    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    ngx_pty_zone.shpool = shpool;

    if (osh) {
        /*
         * reload: sessions live on in the same zone; the workers of the
         * old configuration learn from the generation that they are
         * replaced, not stopped (ngx_pty_instance_stopping)
         */
        (void) ngx_atomic_fetch_add(&osh->generation, 1);
        shm_zone->data = osh;
        ngx_pty_zone.sh = osh;
        return NGX_OK;
    }

    if (shm_zone->shm.exists) {
        shm_zone->data = shpool->data;
        ngx_pty_zone.sh = shpool->data;
        return NGX_OK;
    }

    sh = ngx_slab_calloc(shpool, sizeof(ngx_pty_shm_t));
    if (sh == NULL) {
        return NGX_ERROR;
    }

    ngx_rbtree_init(&sh->rbtree, &sh->sentinel, ngx_pty_shm_rbtree_insert);
    /* names are unique: nginx's own insert */
    ngx_rbtree_init(&sh->names, &sh->names_sentinel,
                    ngx_rbtree_insert_value);
    ngx_queue_init(&sh->sessions);
    sh->next_client = 1;

    /* two nginx instances on one host must not ring each other's workers */
    sh->nonce = ((uint64_t) ngx_random() << 32) ^ (uint64_t) ngx_random()
                ^ ((uint64_t) ngx_pid << 16) ^ (uint64_t) ngx_time();

    if (ngx_pty_random(sh->mcp_secret, sizeof(sh->mcp_secret)) != NGX_OK) {
        return NGX_ERROR;
    }

    shpool->data = sh;
    shm_zone->data = sh;
    ngx_pty_zone.sh = sh;

    shpool->log_nomem = 0;   /* we log with the directive to raise */

    return NGX_OK;
}


ngx_pty_zone_t *
ngx_pty_shm_zone(void)
{
    return ngx_pty_zone.sh ? &ngx_pty_zone : NULL;
}


/*
 * A new session takes little of the zone: the record, the command, and
 * small rings that grow as output arrives (ngx_pty_ring_reserve); the
 * inbox comes with the first request of another worker.
 */
ngx_pty_session_sh_t *
ngx_pty_shm_session_create(ngx_log_t *log, u_char *command, size_t len,
    ngx_str_t *acl, ngx_uint_t cols, ngx_uint_t rows, size_t scroll_size,
    size_t inbox_max)
{
    uint32_t               name;
    ngx_str_t              cmd;
    ngx_pty_session_sh_t  *s;

    /* short names say nothing of how many sessions there are */
    if (ngx_pty_random(&name, sizeof(name)) != NGX_OK) {
        return NULL;
    }

    cmd.data = command;
    cmd.len = len;

    s = ngx_pty_shm_session_alloc(log, &cmd, acl, cols, rows, scroll_size,
                                  inbox_max);
    if (s == NULL) {
        return NULL;
    }

    ngx_pty_uuid7_text(s->id);

    s->state = NGX_PTY_STATE_STARTING;
    s->fresh = 1;
    s->created = ngx_time();
    s->active = s->created;

    ngx_shmtx_lock(&ngx_pty_zone.shpool->mutex);
    ngx_pty_shm_link_locked(s, name % NGX_PTY_NAME_MAX + 1);
    ngx_shmtx_unlock(&ngx_pty_zone.shpool->mutex);

    return s;
}


/*
 * An ended session of the archive, with its tail, for the closed linger
 * time: its frames are in place before any lookup can find it.  Another
 * worker may have brought it back first: that record is the result then,
 * and *found is set.  Retained: release it when done.
 */
ngx_pty_session_sh_t *
ngx_pty_shm_session_restore(ngx_log_t *log, ngx_pty_shm_restore_t *rs,
    size_t scroll_size, ngx_uint_t *found)
{
    ngx_slab_pool_t       *shpool;
    ngx_pty_session_sh_t  *s, *had;

    shpool = ngx_pty_zone.shpool;
    *found = 0;

    s = ngx_pty_shm_session_alloc(log, &rs->command, &rs->acl, rs->cols,
                                  rs->rows, scroll_size, 0);
    if (s == NULL) {
        return NULL;
    }

    ngx_memcpy(s->id, rs->id, NGX_PTY_ID_LEN);

    s->state = NGX_PTY_STATE_CLOSED;
    s->restored = 1;
    s->exit_code = rs->exit_code;
    s->closed_reason = rs->reason;
    s->closed_at = rs->closed_at;
    s->created = rs->created;
    s->active = (time_t) (rs->closed_at / 1000);
    s->params = *rs->params;
    s->closed_linger = rs->closed_linger;
    ngx_pty_ring_limits(s, rs->min_frames, rs->ring_size, rs->ring_max_size);

    if (ngx_pty_shm_restore_frames(s, rs->frames, rs->frames_len) != NGX_OK) {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "pty: shared zone is full, cannot bring session "
                      "pty-%ui back from the archive; raise the size in "
                      "\"pty_zone\"", rs->name);
        ngx_shmtx_lock(&shpool->mutex);
        ngx_pty_shm_free_locked(shpool, s);
        ngx_shmtx_unlock(&shpool->mutex);
        return NULL;
    }

    s->arch_seq = s->seq;
    s->arch_ended = 1;
    s->ring->stored = s->ring->head;

    ngx_shmtx_lock(&shpool->mutex);

    had = ngx_pty_shm_find_by_id(s->id);

    if (had) {
        (void) ngx_atomic_fetch_add(&had->refs, 1);
        ngx_pty_shm_free_locked(shpool, s);
        ngx_shmtx_unlock(&shpool->mutex);
        *found = 1;
        return had;
    }

    ngx_pty_shm_link_locked(s, rs->name ? rs->name : 1);

    ngx_shmtx_unlock(&shpool->mutex);

    return s;
}


/* the tail's records, with their sequences, times and ids; unlinked yet */
static ngx_int_t
ngx_pty_shm_restore_frames(ngx_pty_session_sh_t *s, u_char *p, size_t len)
{
    u_char           *end;
    ngx_pty_frame_t  *f, *copy;

    for (end = p + len; p < end; p += ngx_pty_ring_need(f->len)) {
        f = (ngx_pty_frame_t *) p;

        if (f->target || f->kind == NGX_PTY_FRAME_PAD) {
            continue;
        }

        ngx_pty_ring_reserve(s, f->len, 0);

        s->seq = f->seq - 1;

        copy = ngx_pty_ring_append(s, f->kind, 0, ngx_pty_frame_data(f),
                                   f->len);
        if (copy == NULL) {
            return NGX_ERROR;
        }

        ngx_memcpy(copy, f, offsetof(ngx_pty_frame_t, len));
        copy->cols = f->cols;
        copy->rows = f->rows;
        ngx_memcpy(copy->id, f->id, sizeof(f->id));

        if (f->kind == NGX_PTY_FRAME_OUTPUT
            || f->kind == NGX_PTY_FRAME_RESIZE)
        {
            s->last_output = f->seq;
        }
    }

    return NGX_OK;
}


/*
 * A record with its ring, scrollback, command and access list, not yet
 * in the tables; the zone's oldest ended sessions make room if need be.
 */
static ngx_pty_session_sh_t *
ngx_pty_shm_session_alloc(ngx_log_t *log, ngx_str_t *command, ngx_str_t *acl,
    ngx_uint_t cols, ngx_uint_t rows, size_t scroll_size, size_t inbox_max)
{
    u_char                *p, *ring, *sc;
    size_t                 scroll, len;
    ngx_slab_pool_t       *shpool;
    ngx_pty_session_sh_t  *s;

    shpool = ngx_pty_zone.shpool;
    len = command->len;

    scroll = ngx_min(scroll_size, NGX_PTY_SCROLL_INITIAL);

    for ( ;; ) {
        ngx_shmtx_lock(&shpool->mutex);

        s = ngx_slab_calloc_locked(shpool, sizeof(ngx_pty_session_sh_t));
        ring = ngx_slab_alloc_locked(shpool, NGX_PTY_RING_INITIAL);
        sc = ngx_slab_alloc_locked(shpool, scroll);
        p = ngx_slab_alloc_locked(shpool, len + 1 + acl->len);

        if (s && ring && sc && p) {
            break;
        }

        if (s) {
            ngx_slab_free_locked(shpool, s);
        }

        if (ring) {
            ngx_slab_free_locked(shpool, ring);
        }

        if (sc) {
            ngx_slab_free_locked(shpool, sc);
        }

        if (p) {
            ngx_slab_free_locked(shpool, p);
        }

        ngx_shmtx_unlock(&shpool->mutex);

        /* ended sessions give way to a new one */
        if (ngx_pty_shm_reclaim(NULL)) {
            continue;
        }

        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "pty: shared zone is full, cannot create a session; "
                      "raise the size in \"pty_zone\"");
        return NULL;
    }

    ngx_shmtx_unlock(&shpool->mutex);

    s->ring = &s->ring_hdr;
    s->ring->data = ring;
    s->ring->size = NGX_PTY_RING_INITIAL;
    s->ring->grow_to = NGX_PTY_RING_INITIAL;
    s->ring->max_size = NGX_PTY_RING_INITIAL;

    s->scroll = &s->scroll_hdr;
    s->scroll->data = sc;
    s->scroll->size = scroll;
    s->scroll->max_size = scroll_size;

    ngx_memcpy(p, command->data, len);
    p[len] = '\0';

    /* the access list is in place before any lookup can find the record */
    s->acl = p + len + 1;
    s->acl_len = acl->len;
    ngx_memcpy(s->acl, acl->data, acl->len);

    s->owner = ngx_pid;            /* before any worker can see it */
    s->refs = 1;
    s->exit_code = -1;
    s->cols = cols;
    s->rows = rows;
    s->command = p;
    s->command_len = len;
    s->inbox_max = inbox_max;
    s->ring_hdr.archive = ngx_pty_zone.sh->archive;
    ngx_queue_init(&s->members);

    return s;
}


/* into the tables under a free name from name on; the zone is locked */
static void
ngx_pty_shm_link_locked(ngx_pty_session_sh_t *s, ngx_uint_t name)
{
    ngx_pty_shm_t  *sh;

    sh = ngx_pty_zone.sh;

    for (s->name = name;
         ngx_pty_shm_find_by_name(s->name);
         s->name = s->name % NGX_PTY_NAME_MAX + 1)
    { /* void */ }

    s->node.key = ngx_murmur_hash2(s->id, NGX_PTY_ID_LEN);
    ngx_rbtree_insert(&sh->rbtree, &s->node);

    s->name_node.key = s->name;
    ngx_rbtree_insert(&sh->names, &s->name_node);

    ngx_queue_insert_tail(&sh->sessions, &s->queue);
    sh->live++;
}


/*
 * The zone's pages in use, and what the sessions hold of them.  Walks
 * every session under the slab mutex: for an operator's look, not for a
 * request path.
 */
void
ngx_pty_shm_stat(ngx_pty_shm_stat_t *st)
{
    ngx_queue_t           *q;
    ngx_slab_pool_t       *shpool;
    ngx_pty_session_sh_t  *s;

    shpool = ngx_pty_zone.shpool;

    ngx_memzero(st, sizeof(ngx_pty_shm_stat_t));

    ngx_shmtx_lock(&shpool->mutex);

    st->size = (shpool->last - shpool->pages) << ngx_pagesize_shift;
    st->used = st->size - (shpool->pfree << ngx_pagesize_shift);

    for (q = ngx_queue_head(&ngx_pty_zone.sh->sessions);
         q != ngx_queue_sentinel(&ngx_pty_zone.sh->sessions);
         q = ngx_queue_next(q))
    {
        s = ngx_queue_data(q, ngx_pty_session_sh_t, queue);

        st->sessions++;
        st->running += (s->state < NGX_PTY_STATE_CLOSED);

        /*
         * Read without the session lock: workers take the slab mutex
         * inside it (ngx_pty_shm_member_add).  A figure may be a moment
         * old; the record cannot go while the mutex is held.
         */
        st->ring += s->ring->size;
        st->ring_used += s->ring->head - s->ring->tail;
        st->scroll += s->scroll->size;
        st->scroll_used += ngx_min(s->scroll->head, s->scroll->size);
        st->inbox += s->inbox_size;
    }

    ngx_shmtx_unlock(&shpool->mutex);
}


static ngx_pty_session_sh_t *
ngx_pty_shm_find_by_name(ngx_uint_t name)
{
    ngx_rbtree_node_t  *node, *sentinel;

    node = ngx_pty_zone.sh->names.root;
    sentinel = ngx_pty_zone.sh->names.sentinel;

    while (node != sentinel) {
        if (name == node->key) {
            return (ngx_pty_session_sh_t *)
                       ((u_char *) node
                        - offsetof(ngx_pty_session_sh_t, name_node));
        }

        node = (name < node->key) ? node->left : node->right;
    }

    return NULL;
}


static ngx_pty_session_sh_t *
ngx_pty_shm_find_by_id(u_char *id)
{
    ngx_int_t              rc;
    ngx_rbtree_key_t       key;
    ngx_rbtree_node_t     *node, *sentinel;
    ngx_pty_session_sh_t  *s;

    key = ngx_murmur_hash2(id, NGX_PTY_ID_LEN);

    node = ngx_pty_zone.sh->rbtree.root;
    sentinel = ngx_pty_zone.sh->rbtree.sentinel;

    while (node != sentinel) {
        if (key != node->key) {
            node = (key < node->key) ? node->left : node->right;
            continue;
        }

        s = (ngx_pty_session_sh_t *) node;

        rc = ngx_strncasecmp(id, s->id, NGX_PTY_ID_LEN);

        if (rc == 0) {
            return s;
        }

        node = (rc < 0) ? node->left : node->right;
    }

    return NULL;
}


/* by UUID or by "pty-N"; the result is retained: release it when done */
ngx_pty_session_sh_t *
ngx_pty_shm_session_find(ngx_str_t *id)
{
    ngx_int_t              n;
    ngx_slab_pool_t       *shpool;
    ngx_pty_session_sh_t  *s;

    shpool = ngx_pty_zone.shpool;
    s = NULL;

    ngx_shmtx_lock(&shpool->mutex);

    if (id->len > 4 && ngx_strncmp(id->data, "pty-", 4) == 0) {
        n = ngx_atoi(id->data + 4, id->len - 4);
        if (n > 0) {
            s = ngx_pty_shm_find_by_name((ngx_uint_t) n);
        }

    } else if (ngx_pty_uuid_valid(id->data, id->len)) {
        s = ngx_pty_shm_find_by_id(id->data);
    }

    if (s) {
        (void) ngx_atomic_fetch_add(&s->refs, 1);
    }

    ngx_shmtx_unlock(&shpool->mutex);

    return s;
}


void
ngx_pty_shm_session_retain(ngx_pty_session_sh_t *s)
{
    (void) ngx_atomic_fetch_add(&s->refs, 1);
}


static void
ngx_pty_shm_unlink_locked(ngx_pty_session_sh_t *s)
{
    ngx_pty_tomb_t  *t;

    if (s->state != NGX_PTY_STATE_GONE) {
        t = &ngx_pty_zone.sh->tombs[ngx_pty_zone.sh->tomb_next++
                                    % NGX_PTY_TOMBS];
        t->name = s->name;
        ngx_memcpy(t->id, s->id, NGX_PTY_ID_LEN);
        t->closed_at = (s->state == NGX_PTY_STATE_CLOSED) ? s->closed_at : 0;
        t->exit_code = s->exit_code;
        t->closed_reason = s->closed_reason;

        ngx_rbtree_delete(&ngx_pty_zone.sh->rbtree, &s->node);
        ngx_rbtree_delete(&ngx_pty_zone.sh->names, &s->name_node);
        ngx_queue_remove(&s->queue);
        ngx_pty_zone.sh->live--;
        s->state = NGX_PTY_STATE_GONE;
    }
}


/* takes the session out of the tables: no new lookups find it */
ngx_int_t
ngx_pty_shm_tomb_find(ngx_str_t *id, ngx_pty_tomb_t *tomb)
{
    ngx_int_t         n, rc;
    ngx_uint_t        i;
    ngx_pty_tomb_t   *t;
    ngx_slab_pool_t  *shpool;

    shpool = ngx_pty_zone.shpool;
    n = 0;

    if (id->len > 4 && ngx_strncmp(id->data, "pty-", 4) == 0) {
        n = ngx_atoi(id->data + 4, id->len - 4);

        if (n <= 0) {
            return NGX_ABORT;
        }

    } else if (id->len != NGX_PTY_ID_LEN) {
        return NGX_ABORT;
    }

    ngx_shmtx_lock(&shpool->mutex);

    rc = NGX_DECLINED;

    /* newest first: a name is given again once free */
    for (i = 1; i <= NGX_PTY_TOMBS; i++) {
        t = &ngx_pty_zone.sh->tombs[(ngx_pty_zone.sh->tomb_next - i)
                                    % NGX_PTY_TOMBS];

        if (t->name != 0
            && ((n > 0 && t->name == (ngx_uint_t) n)
                || (n == 0 && ngx_memcmp(t->id, id->data, NGX_PTY_ID_LEN)
                              == 0)))
        {
            *tomb = *t;
            rc = NGX_OK;
            break;
        }
    }

    ngx_shmtx_unlock(&shpool->mutex);

    return rc;
}


void
ngx_pty_shm_session_unlink(ngx_pty_session_sh_t *s)
{
    ngx_slab_pool_t  *shpool;

    shpool = ngx_pty_zone.shpool;

    ngx_shmtx_lock(&shpool->mutex);
    ngx_pty_shm_unlink_locked(s);
    ngx_shmtx_unlock(&shpool->mutex);
}


void
ngx_pty_shm_set_reclaim(ngx_pty_shm_reclaim_pt handler)
{
    ngx_pty_shm_reclaimer = handler;
}


/* 1: an ended session gave its memory back, try again; only for live ones */
ngx_uint_t
ngx_pty_shm_reclaim(ngx_pty_session_sh_t *s)
{
    if (ngx_pty_shm_reclaimer == NULL) {
        return 0;
    }

    return ngx_pty_shm_reclaimer((s && s->state >= NGX_PTY_STATE_CLOSED)
                                 ? s->closed_at : (uint64_t) -1);
}


void *
ngx_pty_shm_alloc(ngx_pty_session_sh_t *s, size_t size)
{
    void  *p;

    for ( ;; ) {
        p = ngx_slab_alloc(ngx_pty_zone.shpool, size);

        if (p != NULL || !ngx_pty_shm_reclaim(s)) {
            return p;
        }
    }
}


ngx_int_t
ngx_pty_shm_forget_oldest(ngx_pty_session_sh_t **sh, uint64_t ended_before)
{
    ngx_uint_t             name;
    ngx_queue_t           *q;
    ngx_slab_pool_t       *shpool;
    ngx_pty_session_sh_t  *s, *old;

    shpool = ngx_pty_zone.shpool;
    old = NULL;

    ngx_shmtx_lock(&shpool->mutex);

    for (q = ngx_queue_head(&ngx_pty_zone.sh->sessions);
         q != ngx_queue_sentinel(&ngx_pty_zone.sh->sessions);
         q = ngx_queue_next(q))
    {
        s = ngx_queue_data(q, ngx_pty_session_sh_t, queue);

        if (s->state == NGX_PTY_STATE_CLOSED && s->closed_at < ended_before
            && (old == NULL || s->closed_at < old->closed_at))
        {
            old = s;
        }
    }

    if (old == NULL) {
        ngx_shmtx_unlock(&shpool->mutex);
        return NGX_DECLINED;
    }

    name = old->name;
    ngx_pty_shm_unlink_locked(old);

    if (old->refs == 0) {
        /* no worker has a view of it: its owner exited while it lingered */
        ngx_pty_shm_free_locked(shpool, old);
        old = NULL;

    } else {
        (void) ngx_atomic_fetch_add(&old->refs, 1);
    }

    ngx_shmtx_unlock(&shpool->mutex);

    ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                  "pty: ended session pty-%ui forgotten before its "
                  "pty_closed_linger: the shared zone is full; raise the "
                  "size in \"pty_zone\"", name);

    *sh = old;

    return NGX_OK;
}


/*
 * The rings of a forgotten session go at once, not with its last view:
 * readers find them empty and unable to grow.  A session whose lock is
 * held right now keeps them until its record goes.
 */
void
ngx_pty_shm_session_strip(ngx_pty_session_sh_t *s)
{
    u_char            *ring, *sc, *inbox;
    ngx_slab_pool_t   *shpool;
    ngx_pty_reveal_t  *reveal;

    if (!ngx_atomic_cmp_set(&s->lock, 0, ngx_pid)) {
        return;
    }

    ring = s->ring->data;
    s->ring->data = NULL;
    s->ring->size = 0;
    s->ring->tail = s->ring->head;
    s->ring->frames = 0;
    s->ring->grow_to = 0;
    s->ring->max_size = 0;
    s->ring->grow_failed = 1;

    sc = s->scroll->data;
    s->scroll->data = NULL;
    s->scroll->size = 0;
    s->scroll->max_size = 0;
    s->scroll->grow_failed = 1;

    inbox = s->inbox;
    s->inbox = NULL;
    s->inbox_size = 0;
    s->inbox_len = 0;
    s->inbox_max = 0;

    reveal = s->reveal;
    s->reveal = NULL;

    ngx_pty_shm_unlock(s);

    shpool = ngx_pty_zone.shpool;

    ngx_shmtx_lock(&shpool->mutex);

    if (ring) {
        ngx_slab_free_locked(shpool, ring);
    }

    if (sc) {
        ngx_slab_free_locked(shpool, sc);
    }

    if (inbox) {
        ngx_slab_free_locked(shpool, inbox);
    }

    ngx_pty_reveal_free_locked(shpool, reveal);

    ngx_shmtx_unlock(&shpool->mutex);
}


void
ngx_pty_shm_session_release(ngx_pty_session_sh_t *s)
{
    ngx_slab_pool_t  *shpool;

    shpool = ngx_pty_zone.shpool;

    ngx_shmtx_lock(&shpool->mutex);

    if (ngx_atomic_fetch_add(&s->refs, -1) == 1
        && s->state == NGX_PTY_STATE_GONE)
    {
        ngx_pty_shm_free_locked(shpool, s);
    }

    ngx_shmtx_unlock(&shpool->mutex);
}


static void
ngx_pty_shm_free_locked(ngx_slab_pool_t *shpool, ngx_pty_session_sh_t *s)
{
    ngx_queue_t       *q;
    ngx_pty_member_t  *m;

    while (!ngx_queue_empty(&s->members)) {
        q = ngx_queue_head(&s->members);
        m = ngx_queue_data(q, ngx_pty_member_t, queue);
        ngx_queue_remove(q);
        ngx_slab_free_locked(shpool, m);
    }

    /* a forgotten session's were given back already */
    if (s->ring->data) {
        ngx_slab_free_locked(shpool, s->ring->data);
    }

    if (s->scroll->data) {
        ngx_slab_free_locked(shpool, s->scroll->data);
    }

    ngx_slab_free_locked(shpool, s->command);

    if (s->inbox) {
        ngx_slab_free_locked(shpool, s->inbox);
    }

    if (s->api_spill) {
        ngx_slab_free_locked(shpool, s->api_spill);
    }

    ngx_pty_reveal_free_locked(shpool, s->reveal);

    ngx_slab_free_locked(shpool, s);
}


ngx_uint_t
ngx_pty_pid_alive(ngx_pid_t pid)
{
    u_char    *p, *last;
    ssize_t    n;
    ngx_fd_t   fd;
    u_char     buf[128], path[sizeof("/proc//stat") + NGX_INT64_LEN];

    if (pid <= 0) {
        return 0;
    }

    /* EPERM: alive, someone else's; a reaped worker gives ESRCH */
    if (kill(pid, 0) == -1) {
        return ngx_errno != NGX_ESRCH;
    }

    /*
     * A worker killed and not yet reaped by the master is a zombie: its
     * sockets are closed and its clients gone.  What it held is taken
     * over now, not when the master gets to it.
     */
    ngx_sprintf(path, "/proc/%P/stat%Z", pid);

    fd = ngx_open_file(path, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
    if (fd == NGX_INVALID_FILE) {
        return 1;
    }

    n = read(fd, buf, sizeof(buf));
    (void) ngx_close_file(fd);

    /* "pid (comm) S ...": the state follows the last ')' */
    for (p = buf + ngx_max(n, 0); p > buf && p[-1] != ')'; p--) {
        /* void */
    }

    last = buf + ngx_max(n, 0);

    return !(p > buf && last - p >= 2 && (p[1] == 'Z' || p[1] == 'X'));
}


/*
 * ngx_spinlock() with a way out: after a while of spinning the waiter
 * looks at the holder, and if that process is gone (killed while holding
 * the lock) it takes the lock over with a compare-and-swap on the dead
 * pid, so two waiters cannot both take it.  The session it protects may
 * be half-updated; every update under it is a few stores that leave the
 * ring and members consistent at each step, which is what makes this
 * acceptable.
 */
void
ngx_pty_shm_lock_recover(ngx_atomic_t *lock)
{
    ngx_uint_t         i, n;
    ngx_atomic_uint_t  holder;

    for ( ;; ) {

        for (n = 0; n < 64; n++) {
            holder = *lock;

            if (holder == 0 && ngx_atomic_cmp_set(lock, 0, ngx_pid)) {
                return;
            }

            if (ngx_ncpu > 1) {
                for (i = 0; i < 1024; i++) {
                    ngx_cpu_pause();
                }
            }

            ngx_sched_yield();
        }

        holder = *lock;

        if (holder != 0 && holder != (ngx_atomic_uint_t) ngx_pid
            && !ngx_pty_pid_alive((ngx_pid_t) holder)
            && ngx_atomic_cmp_set(lock, holder, ngx_pid))
        {
            ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                          "pty: took over a session lock held by process "
                          "%P, which is gone", (ngx_pid_t) holder);
            return;
        }
    }
}


/* NGX_OK: need more bytes fit; NGX_AGAIN: after a grow; NGX_DECLINED */
static ngx_int_t
ngx_pty_inbox_room(ngx_pty_session_sh_t *s, size_t need)
{
    if (s->inbox_len + need <= s->inbox_size) {
        return NGX_OK;
    }

    return (s->inbox_len + need > s->inbox_max) ? NGX_DECLINED : NGX_AGAIN;
}


ngx_int_t
ngx_pty_inbox_put(ngx_pty_session_sh_t *s, ngx_pty_inbox_t *rec,
    const u_char *data)
{
    size_t     need;
    ngx_int_t  rc;

    need = sizeof(ngx_pty_inbox_t) + ngx_align(rec->len, 8);

    rc = ngx_pty_inbox_room(s, need);
    if (rc != NGX_OK) {
        return rc;
    }

    ngx_memcpy(s->inbox + s->inbox_len, rec, sizeof(ngx_pty_inbox_t));

    if (rec->len) {
        ngx_memcpy(s->inbox + s->inbox_len + sizeof(ngx_pty_inbox_t), data,
                   rec->len);
    }

    s->inbox_len += need;

    return NGX_OK;
}


ngx_int_t
ngx_pty_inbox_unshift(ngx_pty_session_sh_t *s, ngx_pty_inbox_t *rec,
    const u_char *data)
{
    size_t     need;
    ngx_int_t  rc;

    need = sizeof(ngx_pty_inbox_t) + ngx_align(rec->len, 8);

    rc = ngx_pty_inbox_room(s, need);
    if (rc != NGX_OK) {
        return rc;
    }

    if (s->inbox_len) {
        ngx_memmove(s->inbox + need, s->inbox, s->inbox_len);
    }

    ngx_memcpy(s->inbox, rec, sizeof(ngx_pty_inbox_t));
    ngx_memcpy(s->inbox + sizeof(ngx_pty_inbox_t), data, rec->len);

    s->inbox_len += need;

    return NGX_OK;
}


/*
 * Makes the inbox hold need more bytes.  The slab mutex is never taken
 * under the session lock (the master takes them the other way round on
 * shutdown): allocate, then swap under the lock if still needed.
 */
ngx_int_t
ngx_pty_inbox_grow(ngx_pty_session_sh_t *s, size_t need)
{
    u_char           *p, *old;
    size_t            size;
    ngx_slab_pool_t  *shpool;

    shpool = ngx_pty_zone.shpool;

    ngx_pty_shm_lock(s);
    size = ngx_max(s->inbox_size, 256);
    while (size < s->inbox_len + need) {
        size *= 2;
    }
    size = ngx_min(size, s->inbox_max);
    ngx_pty_shm_unlock(s);

    p = ngx_pty_shm_alloc(s, size);
    if (p == NULL) {
        return NGX_ERROR;
    }

    ngx_pty_shm_lock(s);

    if (s->inbox_size >= size) {
        /* another worker grew it meanwhile */
        old = p;

    } else {
        old = s->inbox;

        if (s->inbox_len) {
            ngx_memcpy(p, s->inbox, s->inbox_len);
        }

        s->inbox = p;
        s->inbox_size = size;
    }

    ngx_pty_shm_unlock(s);

    if (old) {
        ngx_slab_free(shpool, old);
    }

    return NGX_OK;
}


uint32_t
ngx_pty_shm_next_client_id(void)
{
    return (uint32_t) ngx_atomic_fetch_add(&ngx_pty_zone.sh->next_client, 1);
}


/* caller holds the session lock; the slab mutex nests inside it */
ngx_pty_member_t *
ngx_pty_shm_member_add(ngx_pty_session_sh_t *s, uint32_t client_id,
    ngx_uint_t role, u_char *label, size_t len)
{
    ngx_pty_member_t  *m;

    m = ngx_pty_shm_alloc(s, sizeof(ngx_pty_member_t));
    if (m == NULL) {
        return NULL;
    }

    m->client_id = client_id;
    m->worker = ngx_pid;
    m->role = role;
    m->label_len = ngx_min(len, sizeof(m->label));
    ngx_memcpy(m->label, label, m->label_len);

    ngx_queue_insert_tail(&s->members, &m->queue);

    if (role == NGX_PTY_ROLE_CONTROLLER) {
        s->controllers++;

    } else {
        s->observers++;
    }

    return m;
}


void
ngx_pty_shm_member_remove(ngx_pty_session_sh_t *s, ngx_pty_member_t *m)
{
    if (m->role == NGX_PTY_ROLE_CONTROLLER) {
        s->controllers--;

    } else {
        s->observers--;
    }

    ngx_queue_remove(&m->queue);
    ngx_slab_free(ngx_pty_zone.shpool, m);
}


/* frame footprint in the ring */
size_t
ngx_pty_ring_need(size_t len)
{
    return sizeof(ngx_pty_frame_t) + ngx_align(len, NGX_PTY_RING_ALIGN);
}


void
ngx_pty_ring_limits(ngx_pty_session_sh_t *s, ngx_uint_t min_frames,
    size_t grow_to, size_t max_size)
{
    s->ring->min_frames = (uint32_t) ngx_min(min_frames, 0xffffffff);
    s->ring->grow_to = grow_to;
    s->ring->max_size = ngx_max(max_size, s->ring->size);
}


static void
ngx_pty_ring_evict(ngx_pty_ring_t *ring)
{
    ngx_pty_frame_t  *f;

    f = (ngx_pty_frame_t *) (ring->data + ring->tail % ring->size);

    ring->tail += ngx_pty_ring_need(f->len);

    if (f->kind != NGX_PTY_FRAME_PAD) {
        ring->frames--;
    }
}


/* whether the ring may double rather than evict */
static ngx_uint_t
ngx_pty_ring_may_grow(ngx_pty_ring_t *ring)
{
    if (ring->grow_failed || ring->size * 2 > ring->max_size) {
        return 0;
    }

    return ring->size < ring->grow_to || ring->frames < ring->min_frames
           || (ring->archive && ring->tail >= ring->stored);
}


/* the size the ring will reach by growing freely, without evicting */
size_t
ngx_pty_ring_reach(ngx_pty_ring_t *ring)
{
    size_t  size;

    size = ring->size;

    if (ring->grow_failed) {
        return size;
    }

    while (size < ring->grow_to && size * 2 <= ring->max_size) {
        size *= 2;
    }

    return size;
}


/*
 * Moves the ring to data twice its size, keeping every record at its
 * logical offset: a record never crosses a multiple of the old size, and
 * multiples of the new size are multiples of the old one, so it crosses
 * none in the new ring either.  Readers' cursors stay valid.  Caller holds
 * the session lock; returns the old data, for the caller to free.
 */
static u_char *
ngx_pty_ring_move(ngx_pty_ring_t *ring, u_char *data)
{
    u_char    *old;
    size_t     size, n;
    uint64_t   off, end;

    size = ring->size * 2;

    for (off = ring->tail; off < ring->head; off += n) {
        end = ngx_min(ring->head, (off / ring->size + 1) * ring->size);
        n = end - off;
        ngx_memcpy(data + off % size, ring->data + off % ring->size, n);
    }

    old = ring->data;
    ring->data = data;
    ring->size = size;

    return old;
}


/* said once per session (grow_failed): the zone or the cap is too small */
static void
ngx_pty_ring_warn(ngx_pty_session_sh_t *s, ngx_uint_t zone)
{
    if (zone) {
        ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                      "pty: the ring of session pty-%ui stays at %uz bytes "
                      "and evicts: the shared zone is full; raise the size "
                      "in \"pty_zone\"", s->name, s->ring->size);
        return;
    }

    ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                  "pty: session pty-%ui keeps fewer than %uD frames "
                  "(replay_buffer_frames): the ring reached %s",
                  s->name, s->ring->min_frames,
                  s->ring->capped ? "what \"pty_session_max_memory\" "
                                    "leaves it"
                                  : "\"pty_ring_max_size\"");
}


/*
 * Doubles the ring under the session lock.  The slab mutex is only tried:
 * the master's shutdown path appends with the slab mutex held, and a
 * session lock must never wait on it; ngx_pty_ring_reserve() grows with
 * no lock held beforehand, so this is the exception.
 */
static ngx_int_t
ngx_pty_ring_grow(ngx_pty_session_sh_t *s)
{
    u_char           *data;
    ngx_pty_ring_t   *ring;
    ngx_slab_pool_t  *shpool;

    ring = s->ring;

    if (ring->size * 2 > ring->max_size) {
        return NGX_DECLINED;
    }

    shpool = ngx_pty_zone.shpool;

    if (!ngx_shmtx_trylock(&shpool->mutex)) {
        return NGX_DECLINED;
    }

    data = ngx_slab_alloc_locked(shpool, ring->size * 2);

    if (data == NULL) {
        ngx_shmtx_unlock(&shpool->mutex);
        return NGX_ERROR;
    }

    ngx_slab_free_locked(shpool, ngx_pty_ring_move(ring, data));

    ngx_shmtx_unlock(&shpool->mutex);

    return NGX_OK;
}


/* makes room at the head, growing rather than evicting while it may */
static void
ngx_pty_ring_make_room(ngx_pty_session_sh_t *s, size_t need)
{
    ngx_int_t        rc;
    ngx_pty_ring_t  *ring;

    ring = s->ring;

    while (ring->head + need - ring->tail > ring->size) {

        if (ngx_pty_ring_may_grow(ring)) {
            rc = ngx_pty_ring_grow(s);

            if (rc == NGX_OK) {
                return;     /* the end moved: the caller looks again */
            }

            if (rc == NGX_ERROR) {
                ring->grow_failed = 1;
                ngx_pty_ring_warn(s, 1);
            }
        }

        if (ring->frames < ring->min_frames) {
            if (ring->size * 2 > ring->max_size && !ring->grow_failed) {
                ring->grow_failed = 1;
                ngx_pty_ring_warn(s, 0);
            }

            ring->evicted++;
        }

        ngx_pty_ring_evict(ring);
    }
}


/*
 * Grows the ring and the scrollback ahead of an append of a frame of len
 * and of scroll raw bytes, so that the append finds room without evicting
 * or overwriting while they may still grow.  The allocation is made with
 * no lock held and swapped in under the session lock; a zone too full for
 * it leaves them as they are (the ring evicts, the scrollback wraps) and
 * says so once.  Only the owner writes the scrollback.
 */
void
ngx_pty_ring_reserve(ngx_pty_session_sh_t *s, size_t len, size_t scroll)
{
    u_char           *data, *old;
    size_t            need, size;
    ngx_uint_t        warn;
    ngx_pty_ring_t   *ring;
    ngx_slab_pool_t  *shpool;

    shpool = ngx_pty_zone.shpool;
    ring = s->ring;

    /* a pad may take up to a record's size at the end of a lap */
    need = 2 * ngx_pty_ring_need(len);

    /*
     * Looked at without the lock first: growing is rare.  A frame larger
     * than half the ring (a Keyframe of a large screen) grows it whatever
     * it holds, as ngx_pty_ring_append() would.
     */
    while ((ring->head + need - ring->tail > ring->size
            && ngx_pty_ring_may_grow(ring))
           || (need / 2 > ring->size / 2 && !ring->grow_failed
               && ring->size * 2 <= ring->max_size))
    {
        size = ring->size;

        data = ngx_pty_shm_alloc(s, size * 2);

        ngx_pty_shm_lock(s);

        old = data;
        warn = 0;

        if (data == NULL) {
            warn = !ring->grow_failed;
            ring->grow_failed = 1;

        } else if (ring->size == size) {
            old = ngx_pty_ring_move(ring, data);
        }

        ngx_pty_shm_unlock(s);

        if (old) {
            ngx_slab_free(shpool, old);
        }

        if (warn) {
            ngx_pty_ring_warn(s, 1);
        }
    }

    ngx_pty_scroll_reserve(s, scroll);
}


/*
 * The scrollback's part of ngx_pty_ring_reserve(): it grows, keeping what
 * it retains at its offsets, up to its configured size.
 */
static void
ngx_pty_scroll_reserve(ngx_pty_session_sh_t *s, size_t scroll)
{
    u_char            *data, *old;
    size_t             size, n;
    uint64_t           off;
    ngx_slab_pool_t   *shpool;
    ngx_pty_scroll_t  *sc;

    shpool = ngx_pty_zone.shpool;
    sc = s->scroll;

    if (sc->head + scroll <= sc->size || sc->size >= sc->max_size
        || sc->grow_failed)
    {
        return;
    }

    size = sc->size;

    do {
        size = ngx_min(size * 2, sc->max_size);
    } while (size < sc->max_size && sc->head + scroll > size);

    data = ngx_pty_shm_alloc(s, size);

    if (data == NULL) {
        sc->grow_failed = 1;
        ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                      "pty: the scrollback of session pty-%ui stays at %uz "
                      "bytes: the shared zone is full; raise the size in "
                      "\"pty_zone\"", s->name, sc->size);
        return;
    }

    ngx_pty_shm_lock(s);

    /* what is retained keeps its offset */
    off = (sc->head > sc->size) ? sc->head - sc->size : 0;

    for ( /* void */ ; off < sc->head; off += n) {
        n = ngx_min(sc->head - off, sc->size - off % sc->size);
        n = ngx_min(n, size - off % size);
        ngx_memcpy(data + off % size, sc->data + off % sc->size, n);
    }

    old = sc->data;
    sc->data = data;
    sc->size = size;

    ngx_pty_shm_unlock(s);

    ngx_slab_free(shpool, old);
}


ngx_pty_frame_t *
ngx_pty_ring_append(ngx_pty_session_sh_t *s, ngx_uint_t kind,
    uint32_t target, const u_char *data, size_t len)
{
    size_t            need, size, room;
    ngx_pty_ring_t   *ring;
    ngx_pty_frame_t  *f;

    need = ngx_pty_ring_need(len);

    if (need > s->ring->max_size / 2) {
        return NULL;
    }

    while (need > s->ring->size / 2) {
        /* one big frame (a keyframe of a large screen): grow for it */
        if (ngx_pty_ring_grow(s) != NGX_OK) {
            return NULL;
        }
    }

    for ( ;; ) {
        size = s->ring->size;
        room = size - s->ring->head % size;

        /* no record straddles the end: a pad fills it, saying how far */
        ngx_pty_ring_make_room(s, ngx_min(room, need));

        if (s->ring->size != size) {
            continue;       /* it grew: the end moved, look again */
        }

        ring = s->ring;

        if (room >= need) {
            break;
        }

        f = (ngx_pty_frame_t *) (ring->data + ring->head % size);
        ngx_memzero(f, sizeof(ngx_pty_frame_t));
        f->kind = NGX_PTY_FRAME_PAD;
        f->len = (uint32_t) (room - sizeof(ngx_pty_frame_t));
        ring->head += room;
    }

    f = (ngx_pty_frame_t *) (ring->data + ring->head % ring->size);

    ngx_memzero(f, sizeof(ngx_pty_frame_t));
    f->seq = ++s->seq;
    f->ts = ngx_pty_now_ms();
    f->kind = (uint16_t) kind;
    f->target = target;
    f->len = (uint32_t) len;
    ngx_pty_uuid7_fast(f->id, f->ts);

    if (len) {
        ngx_memcpy(ngx_pty_frame_data(f), data, len);
    }

    ring->head += need;
    ring->frames++;

    return f;
}


/*
 * Returns the record at *off and advances *off past it; NULL at the head.
 * The caller checks *off >= ring->tail first: below it the reader lagged.
 */
ngx_pty_frame_t *
ngx_pty_ring_read(ngx_pty_ring_t *ring, uint64_t *off)
{
    size_t            pos;
    ngx_pty_frame_t  *f;

    while (*off < ring->head) {
        pos = *off % ring->size;
        f = (ngx_pty_frame_t *) (ring->data + pos);

        *off += ngx_pty_ring_need(f->len);

        if (f->kind == NGX_PTY_FRAME_PAD) {
            continue;
        }

        return f;
    }

    return NULL;
}


/* offset of the first record with seq > after_seq, or the head */
uint64_t
ngx_pty_ring_find(ngx_pty_ring_t *ring, uint64_t after_seq)
{
    uint64_t          off;
    ngx_pty_frame_t  *f;

    off = ring->tail;

    for ( ;; ) {
        f = ngx_pty_ring_read(ring, &off);

        if (f == NULL) {
            return ring->head;
        }

        if (f->seq > after_seq) {
            /* back up to the record itself, skipping pads before it */
            return off - ngx_pty_ring_need(f->len);
        }
    }
}


/* sequence of the oldest retained record, 0 when the ring is empty */
uint64_t
ngx_pty_ring_first_seq(ngx_pty_ring_t *ring)
{
    uint64_t          off;
    ngx_pty_frame_t  *f;

    off = ring->tail;
    f = ngx_pty_ring_read(ring, &off);

    return f ? f->seq : 0;
}


void
ngx_pty_scroll_append(ngx_pty_scroll_t *sc, u_char *p, size_t len)
{
    size_t  pos, n;

    if (len > sc->size) {
        sc->head += len - sc->size;
        p += len - sc->size;
        len = sc->size;
    }

    while (len) {
        pos = sc->head % sc->size;
        n = ngx_min(len, sc->size - pos);
        ngx_memcpy(sc->data + pos, p, n);
        sc->head += n;
        p += n;
        len -= n;
    }
}


/* copies from *off on; what was overwritten before it is counted missed */
size_t
ngx_pty_scroll_read(ngx_pty_scroll_t *sc, uint64_t *off, u_char *buf,
    size_t max, uint64_t *missed)
{
    size_t  pos, n, total;

    *missed = 0;

    if (*off < ngx_pty_scroll_tail(sc)) {
        *missed = ngx_pty_scroll_tail(sc) - *off;
        *off = ngx_pty_scroll_tail(sc);
    }

    total = 0;

    while (total < max && *off < sc->head) {
        pos = *off % sc->size;
        n = ngx_min(max - total, sc->size - pos);
        n = ngx_min(n, sc->head - *off);
        ngx_memcpy(buf + total, sc->data + pos, n);
        total += n;
        *off += n;
    }

    return total;
}


/*
 * Where an ended session's ring starts to matter to a late reader: its
 * newest Keyframe (the final screen: the owner makes one before Closed
 * when the screen changed since the last; a late joiner's own is the same
 * screen, and may be all a full zone left), else its Closed, else
 * nothing.  Caller holds the session lock.
 */
static uint64_t
ngx_pty_ring_keep(ngx_pty_ring_t *ring)
{
    uint64_t          off, at, kf, closed;
    ngx_pty_frame_t  *f;

    kf = ring->head;
    closed = ring->head;
    off = ring->tail;

    for ( ;; ) {
        f = ngx_pty_ring_read(ring, &off);

        if (f == NULL) {
            break;
        }

        /* ring_read skipped pads: the record starts where it ends */
        at = off - ngx_pty_ring_need(f->len);

        /* a joiner's Keyframe is the same screen: the newest one is kept */
        if (f->kind == NGX_PTY_FRAME_KEYFRAME) {
            kf = at;

        } else if (f->target != 0) {
            continue;

        } else if (f->kind == NGX_PTY_FRAME_CLOSED && closed == ring->head) {
            closed = at;
        }
    }

    return (kf < closed) ? kf : closed;
}


/*
 * An ended session's ring, nobody joined, cut down to the records from
 * where a late reader starts (ngx_pty_ring_keep) and room for a joiner's
 * frames.  The records move on to offsets after the old head, at the
 * start of a lap of the smaller ring: no record crosses its end, and an
 * offset anyone kept is below the new tail (a reader there starts over
 * at the tail, as a lagging one does).
 */
static void
ngx_pty_ring_compact(ngx_pty_session_sh_t *s)
{
    u_char           *data, *old;
    size_t            size, cur, n;
    uint64_t          from, head, off, tail;
    ngx_pty_ring_t   *ring;
    ngx_pty_frame_t  *f;

    ring = s->ring;

    ngx_pty_shm_lock(s);

    if (ring->archive && ngx_pty_zone.sh->archive && s->arch_seq < s->seq) {
        /* the archive has not stored it all: it compacts when it has */
        ngx_pty_shm_unlock(s);
        return;
    }

    cur = ring->size;
    head = ring->head;
    from = (cur && ring->data) ? ngx_pty_ring_keep(ring) : head;

    ngx_pty_shm_unlock(s);

    for (size = 256; size < head - from + NGX_PTY_RING_SPARE; size *= 2) {
        /* void */
    }

    if (size >= cur) {
        return;
    }

    data = ngx_slab_alloc(ngx_pty_zone.shpool, size);
    if (data == NULL) {
        return;
    }

    ngx_pty_shm_lock(s);

    old = data;

    /* a joiner's frames came meanwhile: it is looked at again later */
    if (ring->head == head && ring->size == cur && ring->tail <= from) {

        tail = (head + size - 1) / size * size;
        ring->frames = 0;

        for (off = from; off < head; off += n) {
            f = (ngx_pty_frame_t *) (ring->data + off % cur);
            n = ngx_pty_ring_need(f->len);
            ngx_memcpy(data + (tail + off - from) % size, f, n);
            ring->frames += (f->kind != NGX_PTY_FRAME_PAD);
        }

        old = ring->data;
        ring->data = data;
        ring->size = size;
        ring->tail = tail;
        ring->head = tail + (head - from);
    }

    ngx_pty_shm_unlock(s);

    ngx_slab_free(ngx_pty_zone.shpool, old);
}


/*
 * The scrollback keeps what the API reader has not taken (nor re-reads),
 * or, once the zone is half full, the last NGX_PTY_SCROLL_TAIL bytes of
 * it: ended sessions nobody reads must not fill the zone.  A reader
 * behind the tail finds the loss marked (ngx_pty_reader.c).
 */
static void
ngx_pty_scroll_compact(ngx_pty_session_sh_t *s)
{
    u_char            *data, *old;
    size_t             size, cur, n;
    uint64_t           from, head, off;
    ngx_uint_t         cut;
    ngx_pty_scroll_t  *sc;

    sc = s->scroll;

    ngx_pty_shm_lock(s);

    cur = sc->size;
    head = sc->head;
    from = ngx_min(s->api_cursor, s->api_line);

    if (head > cur && from < head - cur) {
        from = head - cur;
    }

    ngx_pty_shm_unlock(s);

    cut = (head - from > NGX_PTY_SCROLL_TAIL && ngx_pty_shm_pressed());

    if (cut) {
        from = head - NGX_PTY_SCROLL_TAIL;
    }

    size = ngx_max(ngx_align(head - from, NGX_PTY_SCROLL_MIN),
                   NGX_PTY_SCROLL_MIN);

    if (size >= cur) {
        return;
    }

    /* the new ring holds from here: no byte it claims is left uncopied */
    from = (head > size) ? head - size : 0;

    data = ngx_slab_alloc(ngx_pty_zone.shpool, size);
    if (data == NULL) {
        return;
    }

    ngx_pty_shm_lock(s);

    old = data;

    if (sc->head == head && sc->size == cur
        && (cut || ngx_min(s->api_cursor, s->api_line) >= from))
    {
        for (off = from; off < head; off += n) {
            n = ngx_min(head - off, cur - off % cur);
            n = ngx_min(n, size - off % size);
            ngx_memcpy(data + off % size, sc->data + off % cur, n);
        }

        old = sc->data;
        sc->data = data;
        sc->size = size;
        sc->max_size = size;
    }

    ngx_pty_shm_unlock(s);

    ngx_slab_free(ngx_pty_zone.shpool, old);
}


/* half the zone is taken */
static ngx_uint_t
ngx_pty_shm_pressed(void)
{
    ngx_slab_pool_t  *shpool;

    shpool = ngx_pty_zone.shpool;

    return shpool->pfree < (ngx_uint_t) (shpool->last - shpool->pages) / 2;
}


void
ngx_pty_shm_session_compact(ngx_pty_session_sh_t *s)
{
    ngx_pty_ring_compact(s);
    ngx_pty_scroll_compact(s);
}
