
/*
 * The session keeper: a small process per session, forked ahead of its
 * start (a spare) by the worker's keeper forker.  It owns the child:
 * forkpty()s the command, waits for it (nginx's SIGCHLD handler in workers
 * would throw the exit status away), runs SIGTERM -> grace -> SIGKILL, and
 * ends the session when nginx itself goes away.  The worker gets the PTY
 * master from it over a socket pair (SCM_RIGHTS) and does all I/O in its
 * own event loop: the keeper is never on the data path.
 */

#ifndef _NGX_PTY_KEEPER_H_INCLUDED_
#define _NGX_PTY_KEEPER_H_INCLUDED_


#include "ngx_pty.h"
#include "ngx_pty_shm.h"


#define NGX_PTY_KILL_GRACE  2000    /* ms between SIGTERM and SIGKILL */
#define NGX_PTY_SECRET_LEN  16      /* a keeper's proof that a worker calls */


typedef enum {
    NGX_PTY_KEEPER_READY = 1,      /* value: child pid; carries the master */
    NGX_PTY_KEEPER_EXIT,           /* value: wait status */
    NGX_PTY_KEEPER_FAILED,         /* value: errno of forkpty/exec */
    NGX_PTY_KEEPER_KILL,           /* worker -> keeper: end the child */
    NGX_PTY_KEEPER_TERMINATE,      /* worker -> keeper: nginx stops */
    NGX_PTY_KEEPER_SPAWNED,        /* forker -> worker: value: spare's pid
                                      or -errno; carries its socket */
    NGX_PTY_KEEPER_SPARE,          /* worker -> forker: fork a spare */
    NGX_PTY_KEEPER_START           /* worker -> spare: its session
                                      (ngx_pty_keeper_start_t) */
} ngx_pty_keeper_msg_e;


typedef struct {
    uint32_t                   type;
    int32_t                    value;
} ngx_pty_keeper_msg_t;


typedef struct {
    ngx_pty_session_sh_t      *sh;
    u_char                    *id;          /* NGX_PTY_ID_LEN */
    u_char                    *secret;      /* NGX_PTY_SECRET_LEN */
    u_char                    *command;     /* null-terminated */
    ngx_uint_t                 cols;
    ngx_uint_t                 rows;
    char                      *shell;       /* null-terminated path */
    char                     **envp;
    char                     **argv;        /* set: run path with these
                                               words, not the shell */
    char                      *path;
    char                     **sandbox;     /* set: what the program runs
                                               under (pty_sandbox) */
} ngx_pty_spawn_t;


typedef struct ngx_pty_keeper_req_s  ngx_pty_keeper_req_t;

typedef void (*ngx_pty_keeper_handler_pt)(ngx_pty_keeper_req_t *req);

/*
 * Who a keeper and its program run as.  Set by the spawner for each spare
 * it forks: a worker never chooses the program's user.
 */
typedef struct {
    ngx_uint_t                 privileged;  /* the spawner is root */
    ngx_uid_t                  uid;         /* the program's */
    ngx_gid_t                  gid;
    ngx_uint_t                 ngroups;     /* supplementary, of pty_user */
    ngx_gid_t                 *groups;
    ngx_uid_t                  keeper_uid;  /* the workers' */
    ngx_gid_t                  keeper_gid;
    ngx_pid_t                  nginx_pid;   /* its end ends the session */
} ngx_pty_creds_t;


/* a start's request for its keeper */
struct ngx_pty_keeper_req_s {
    ngx_pty_spawn_t            spawn;
    ngx_pty_keeper_handler_pt  handler;     /* when it waited: the keeper */
    void                      *data;
    ngx_log_t                 *log;
    ngx_pid_t                  pid;         /* NGX_INVALID_PID: none */
    ngx_socket_t               ctl;
    ngx_queue_t                queue;
    unsigned                   pending:1;
};


/* the worker's line to the spawner: opened at its start, closed at its exit */
ngx_int_t ngx_pty_keeper_forker_start(ngx_cycle_t *cycle);
void ngx_pty_keeper_forker_stop(void);
void ngx_pty_keeper_spare_refill(ngx_log_t *log);

/* NGX_OK: req->pid and req->ctl are set; NGX_AGAIN: the handler is called */
ngx_int_t ngx_pty_keeper_spawn(ngx_pty_keeper_req_t *req);
void ngx_pty_keeper_spawn_cancel(ngx_pty_keeper_req_t *req);
void ngx_pty_keeper_spawn_flush(ngx_uint_t exiting);
char **ngx_pty_keeper_env(ngx_pool_t *pool, ngx_array_t *extra);

/* one message and the descriptor it carries (*fd, or -1); recvmsg()'s n */
ssize_t ngx_pty_keeper_take(int ctl, ngx_pty_keeper_msg_t *msg, int *fd,
    int flags);

/* one message of the keepers' protocol, with a descriptor unless fd is -1 */
int ngx_pty_keeper_send(int ctl, uint32_t type, int32_t value, int fd,
    int flags);

/* in the spawner: a spare keeper for a worker, with its users */
ngx_pid_t ngx_pty_keeper_fork_spare(ngx_pty_creds_t *cr, ngx_socket_t *ctl,
    ngx_err_t *err);
void ngx_pty_keeper_zone_bounds(u_char *start, u_char *end);

socklen_t ngx_pty_keeper_address(struct sockaddr_un *sa, u_char *id);
ngx_socket_t ngx_pty_keeper_connect(u_char *id, u_char *secret,
    ngx_log_t *log);

/* non-blocking; NGX_AGAIN when nothing is there yet */
ngx_int_t ngx_pty_keeper_recv(ngx_socket_t ctl, ngx_pty_keeper_msg_t *msg,
    ngx_fd_t *fd, ngx_log_t *log);


#endif /* _NGX_PTY_KEEPER_H_INCLUDED_ */
