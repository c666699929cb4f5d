
/*
 * The spawner: the one process of the module that keeps root.  The master
 * forks it before any worker exists (init_module); it forks the session
 * keepers, and only it decides which user a program runs as.  Workers
 * reach it over a socket pair they inherit, on which each registers a
 * line of its own (ngx_pty_spawner_channel).  Threat model and design:
 * docs/SECURITY.md and docs/ARCHITECTURE.md, "Users".
 */

#ifndef _NGX_PTY_SPAWNER_H_INCLUDED_
#define _NGX_PTY_SPAWNER_H_INCLUDED_


#include "ngx_pty.h"


/* the directives pty_user and pty_user_range */
char *ngx_pty_spawner_set_user(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_pty_spawner_set_range(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);

/* in the master, at each configuration: validates, forks or keeps it */
ngx_int_t ngx_pty_spawner_init(ngx_cycle_t *cycle);

/* in a worker: its own line to the spawner, -1 without one */
ngx_socket_t ngx_pty_spawner_channel(ngx_log_t *log, ngx_pid_t nginx_pid);

ngx_pid_t ngx_pty_spawner_pid(void);

/* programs run as another user than the workers: no keeper of a worker's */
ngx_uint_t ngx_pty_spawner_privileged(void);

/* HOME= and USER= of the programs' user; NGX_DECLINED: the workers' */
ngx_int_t ngx_pty_spawner_user_env(char **home, char **user);


#endif /* _NGX_PTY_SPAWNER_H_INCLUDED_ */
