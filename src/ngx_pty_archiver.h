
/*
 * The archive writer: the one process that writes the archive database.
 * The master forks it at init_module (ngx_pty_archive.c decides when); it
 * drops to the workers' user, follows every session's ring in the zone
 * through its own cursor and stores the frames in batches, prunes in the
 * background, and ends after the master (storing the Closed frames nginx
 * appended on its way out) or when a new configuration replaces it.
 */

#ifndef _NGX_PTY_ARCHIVER_H_INCLUDED_
#define _NGX_PTY_ARCHIVER_H_INCLUDED_


#include "ngx_pty.h"


typedef struct {
    u_char                    *path;          /* NUL-terminated */
    size_t                     path_len;
    ngx_msec_t                 retention;     /* ended sessions */
    off_t                      max_size;
    ngx_msec_t                 prune;
    ngx_uid_t                  uid;           /* the workers' */
    ngx_gid_t                  gid;
    u_char                    *user;          /* their name, or NULL */
} ngx_pty_archiver_conf_t;


/* forks the writer; *ctl: the master's end of its line (a stop: a byte) */
ngx_pid_t ngx_pty_archiver_fork(ngx_cycle_t *cycle,
    ngx_pty_archiver_conf_t *conf, int *ctl);

/* the writer's wake-up address: @ngx_pty_archive/<zone nonce> */
socklen_t ngx_pty_archiver_address(struct sockaddr_un *sa);


#endif /* _NGX_PTY_ARCHIVER_H_INCLUDED_ */
