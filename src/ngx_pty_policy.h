
/*
 * Command policy: what a start may run (pty_allow, pty_deny, pty_command).
 *
 * With pty_allow rules a command is not given to a shell: it is split into
 * words by the shell's quoting rules, anything that only a shell would act
 * on (; & | < > ` $ ( ) { } newline, globs, ~, #, assignments) is refused,
 * and the program is run directly, found through the session's PATH.  The
 * rules see the words again as one canonical line, each word quoted where
 * it has to be, so a word cannot pass for several.
 */

#ifndef _NGX_PTY_POLICY_H_INCLUDED_
#define _NGX_PTY_POLICY_H_INCLUDED_


#include "ngx_pty.h"


#define NGX_PTY_ARGV_MAX  1024      /* words of a command run directly */


typedef struct {
    char                     **argv;     /* NULL: run through pty_shell */
    char                      *path;     /* argv[0] found through PATH */
    ngx_str_t                  line;     /* what the rules were matched on */

    /* a refusal: 403 with this code and message (null-terminated) */
    const char                *code;
    u_char                     reason[NGX_MAX_CONF_ERRSTR];
} ngx_pty_policy_t;


/*
 * NGX_OK: the command may run, as pol->argv (or by the shell when NULL);
 * NGX_DECLINED: refused, pol->code and pol->reason say why; NGX_ERROR.
 * fixed: the command is the location's pty_command, which no rule judges.
 */
ngx_int_t ngx_pty_policy_decide(ngx_pty_loc_conf_t *plcf, ngx_pool_t *pool,
    ngx_str_t *command, ngx_uint_t fixed, ngx_pty_policy_t *pol);

/* the words, split by the shell's quoting rules; NGX_DECLINED: refused */
ngx_int_t ngx_pty_policy_split(ngx_pool_t *pool, ngx_str_t *command,
    ngx_pty_policy_t *pol);

/* a copy of a NULL-terminated argv in the pool */
char **ngx_pty_policy_argv_copy(ngx_pool_t *pool, char **argv);


#endif /* _NGX_PTY_POLICY_H_INCLUDED_ */
