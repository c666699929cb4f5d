
/*
 * Command policy (docs/DIRECTIVES.md, pty_allow).  A regex over a line
 * that a shell then interprets is no boundary: the shell finds a way
 * around any pattern (quotes, backslashes, $(...), env, a newline).  So
 * with pty_allow the shell is out of the path: the words are taken apart
 * here, a command that would need a shell is refused, and the program is
 * executed as these words.  The rules are matched against the canonical
 * form of the words, the line a shell would read back as the same words.
 */

#include "ngx_pty.h"
#include "ngx_pty_policy.h"
#include "ngx_pty_util.h"


typedef struct {
    ngx_pool_t                *pool;
    ngx_pty_policy_t          *pol;
    u_char                    *start;     /* the command */
    u_char                    *last;
    u_char                    *out;       /* words, each null-terminated */
    u_char                    *word;      /* the one being built */
    ngx_array_t                words;     /* of char * */
    unsigned                   in_word:1;
    unsigned                   name:1;    /* so far NAME of NAME=value */
} ngx_pty_split_t;


static ngx_int_t ngx_pty_policy_refuse(ngx_pty_policy_t *pol,
    const char *code, const char *fmt, ...);
static ngx_int_t ngx_pty_policy_shell(ngx_pty_split_t *sp, u_char *p,
    const char *what);
static ngx_int_t ngx_pty_policy_char(ngx_pty_split_t *sp, u_char **pp);
static ngx_int_t ngx_pty_policy_dquote(ngx_pty_split_t *sp, u_char **pp);
static ngx_int_t ngx_pty_policy_end_word(ngx_pty_split_t *sp);
static ngx_int_t ngx_pty_policy_canonical(ngx_pool_t *pool,
    ngx_pty_policy_t *pol);
static ngx_int_t ngx_pty_policy_match(ngx_array_t *rules, ngx_str_t *line,
    ngx_pty_policy_t *pol, ngx_uint_t deny);
static ngx_int_t ngx_pty_policy_resolve(ngx_pty_loc_conf_t *plcf,
    ngx_pool_t *pool, ngx_pty_policy_t *pol);
static ngx_int_t ngx_pty_policy_executable(const char *path);


/* unquoted, these mean something to a shell only */
static const char  ngx_pty_policy_special[] = ";&|<>()`$*?[{}";


ngx_int_t
ngx_pty_policy_decide(ngx_pty_loc_conf_t *plcf, ngx_pool_t *pool,
    ngx_str_t *command, ngx_uint_t fixed, ngx_pty_policy_t *pol)
{
    ngx_int_t  rc;

    ngx_memzero(pol, sizeof(ngx_pty_policy_t));
    pol->line = *command;

    if (fixed) {
        /* the operator's own command line, run as written */
        return NGX_OK;
    }

    if (plcf->allow) {
        rc = ngx_pty_policy_split(pool, command, pol);
        if (rc != NGX_OK) {
            return rc;
        }
    }

    if (plcf->deny) {
        rc = ngx_pty_policy_match(plcf->deny, &pol->line, pol, 1);
        if (rc != NGX_OK) {
            return rc;
        }
    }

    if (plcf->allow == NULL) {
        return NGX_OK;
    }

    rc = ngx_pty_policy_match(plcf->allow, &pol->line, pol, 0);
    if (rc != NGX_OK) {
        return rc;
    }

    return ngx_pty_policy_resolve(plcf, pool, pol);
}


static ngx_int_t
ngx_pty_policy_refuse(ngx_pty_policy_t *pol, const char *code,
    const char *fmt, ...)
{
    u_char   *p;
    va_list   args;

    va_start(args, fmt);
    p = ngx_vslprintf(pol->reason, pol->reason + sizeof(pol->reason) - 1,
                      fmt, args);
    va_end(args);

    *p = '\0';
    pol->code = code;

    return NGX_DECLINED;
}


ngx_int_t
ngx_pty_policy_split(ngx_pool_t *pool, ngx_str_t *command,
    ngx_pty_policy_t *pol)
{
    char            **w;
    u_char           *p;
    ngx_int_t         rc;
    ngx_pty_split_t   sp;

    ngx_memzero(&sp, sizeof(ngx_pty_split_t));
    sp.pool = pool;
    sp.pol = pol;
    sp.start = command->data;
    sp.last = command->data + command->len;

    /* the words are never longer than their quoted text */
    sp.out = ngx_pnalloc(pool, command->len + 1);
    if (sp.out == NULL) {
        return NGX_ERROR;
    }

    if (ngx_array_init(&sp.words, pool, 8, sizeof(char *)) != NGX_OK) {
        return NGX_ERROR;
    }

    for (p = sp.start; p < sp.last; p++) {

        if (*p == ' ' || *p == '\t') {
            rc = ngx_pty_policy_end_word(&sp);

        } else {
            if (!sp.in_word) {
                sp.in_word = 1;
                sp.name = 1;
                sp.word = sp.out;
            }

            rc = ngx_pty_policy_char(&sp, &p);
        }

        if (rc != NGX_OK) {
            return rc;
        }
    }

    rc = ngx_pty_policy_end_word(&sp);
    if (rc != NGX_OK) {
        return rc;
    }

    if (sp.words.nelts == 0) {
        return ngx_pty_policy_refuse(pol, "not_allowed",
                                     "the command has no program");
    }

    w = ngx_array_push(&sp.words);
    if (w == NULL) {
        return NGX_ERROR;
    }

    *w = NULL;
    pol->argv = sp.words.elts;

    return ngx_pty_policy_canonical(pool, pol);
}


static ngx_int_t
ngx_pty_policy_shell(ngx_pty_split_t *sp, u_char *p, const char *what)
{
    u_char  c[NGX_PTY_LOG_STR];
    size_t  n;

    n = ngx_pty_log_escape(c, sizeof(c), p, 1);

    return ngx_pty_policy_refuse(sp->pol, "needs_shell",
                                 "the command needs a shell: %s \"%*s\" at "
                                 "byte %uz (with pty_allow, commands run "
                                 "without one)",
                                 what, n, c, (size_t) (p - sp->start));
}


/* one character of a word (a quote takes all it quotes) */
static ngx_int_t
ngx_pty_policy_char(ngx_pty_split_t *sp, u_char **pp)
{
    u_char  *p, *q, c;

    p = *pp;
    c = *p;

    switch (c) {

    case '\'':
        q = ngx_strlchr(p + 1, sp->last, '\'');
        if (q == NULL) {
            return ngx_pty_policy_shell(sp, p, "an unterminated quote");
        }

        sp->out = ngx_cpymem(sp->out, p + 1, q - p - 1);
        sp->name = 0;
        *pp = q;
        return NGX_OK;

    case '"':
        sp->name = 0;
        return ngx_pty_policy_dquote(sp, pp);

    case '\\':
        if (p + 1 == sp->last) {
            return ngx_pty_policy_shell(sp, p, "a trailing backslash");
        }

        if (p[1] == '\n') {
            return ngx_pty_policy_shell(sp, p + 1, "a continued line");
        }

        *sp->out++ = p[1];
        sp->name = 0;
        *pp = p + 1;
        return NGX_OK;

    case '\n':
        return ngx_pty_policy_shell(sp, p, "a newline");

    case '~':
    case '#':
        if (sp->out == sp->word) {
            return ngx_pty_policy_shell(sp, p, c == '~' ? "a home directory"
                                                        : "a comment");
        }

        break;

    case '=':
        if (sp->name && sp->out > sp->word && sp->words.nelts == 0) {
            return ngx_pty_policy_shell(sp, p, "a variable assignment");
        }

        break;

    default:
        if (c < 0x20 || c == 0x7f) {
            return ngx_pty_policy_shell(sp, p, "a control character");
        }

        if (ngx_strchr(ngx_pty_policy_special, c)) {
            return ngx_pty_policy_shell(sp, p, "the operator");
        }
    }

    if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
          || (c >= '0' && c <= '9' && sp->out > sp->word)))
    {
        sp->name = 0;
    }

    *sp->out++ = c;

    return NGX_OK;
}


/* "...": literal but for \ before $ ` " \, and no expansion at all */
static ngx_int_t
ngx_pty_policy_dquote(ngx_pty_split_t *sp, u_char **pp)
{
    u_char  *q;

    for (q = *pp + 1; q < sp->last; q++) {

        switch (*q) {

        case '"':
            *pp = q;
            return NGX_OK;

        case '$':
        case '`':
            return ngx_pty_policy_shell(sp, q, "an expansion");

        case '\\':
            if (q + 1 < sp->last && ngx_strchr("$`\"\\\n", q[1])) {
                if (q[1] == '\n') {
                    return ngx_pty_policy_shell(sp, q + 1,
                                                "a continued line");
                }

                q++;
            }

            /* fall through */

        default:
            *sp->out++ = *q;
        }
    }

    return ngx_pty_policy_shell(sp, *pp, "an unterminated quote");
}


static ngx_int_t
ngx_pty_policy_end_word(ngx_pty_split_t *sp)
{
    char  **w;

    if (!sp->in_word) {
        return NGX_OK;
    }

    sp->in_word = 0;
    *sp->out++ = '\0';

    if (sp->words.nelts == NGX_PTY_ARGV_MAX) {
        return ngx_pty_policy_refuse(sp->pol, "not_allowed",
                                     "the command has more than %d words",
                                     NGX_PTY_ARGV_MAX);
    }

    w = ngx_array_push(&sp->words);
    if (w == NULL) {
        return NGX_ERROR;
    }

    *w = (char *) sp->word;

    return NGX_OK;
}


/*
 * The words joined by single spaces; a word with anything but
 * [A-Za-z0-9_@%+=:,./-] (or an empty one) in single quotes, a quote in it
 * as '\''.  Read back by a shell, this is the same words again.
 */
static ngx_int_t
ngx_pty_policy_canonical(ngx_pool_t *pool, ngx_pty_policy_t *pol)
{
    u_char      *p, *s, *line;
    size_t       len;
    ngx_uint_t   i, plain;

    len = 0;

    for (i = 0; pol->argv[i]; i++) {
        len += 4 * ngx_strlen(pol->argv[i]) + 3;
    }

    line = ngx_pnalloc(pool, len);
    if (line == NULL) {
        return NGX_ERROR;
    }

    p = line;

    for (i = 0; pol->argv[i]; i++) {
        if (i) {
            *p++ = ' ';
        }

        s = (u_char *) pol->argv[i];
        plain = (*s != '\0');

        for ( /* void */ ; *s; s++) {
            if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')
                  || (*s >= '0' && *s <= '9')
                  || ngx_strchr("_@%+=:,./-", *s)))
            {
                plain = 0;
                break;
            }
        }

        if (plain) {
            p = ngx_cpymem(p, pol->argv[i], ngx_strlen(pol->argv[i]));
            continue;
        }

        *p++ = '\'';

        for (s = (u_char *) pol->argv[i]; *s; s++) {
            if (*s == '\'') {
                p = ngx_cpymem(p, "'\\''", 4);

            } else {
                *p++ = *s;
            }
        }

        *p++ = '\'';
    }

    pol->line.data = line;
    pol->line.len = p - line;

    return NGX_OK;
}


/* deny: NGX_OK when no rule matches; allow: NGX_OK when one does */
static ngx_int_t
ngx_pty_policy_match(ngx_array_t *rules, ngx_str_t *line,
    ngx_pty_policy_t *pol, ngx_uint_t deny)
{
#if (NGX_PCRE)
    ngx_int_t        n;
    ngx_uint_t       i;
    ngx_pty_rule_t  *rule;

    rule = rules->elts;

    for (i = 0; i < rules->nelts; i++) {
        n = ngx_regex_exec(rule[i].regex, line, NULL, 0);

        if (n == NGX_REGEX_NO_MATCHED) {
            continue;
        }

        if (!deny) {
            if (n >= 0) {
                return NGX_OK;
            }

            /* a rule that fails to run admits nothing */
            continue;
        }

        /* a rule that fails to run refuses: fail closed */
        return ngx_pty_policy_refuse(pol, "denied", "%s pty_deny \"%V\"",
                                     n >= 0 ? "the command matches"
                                            : "cannot apply",
                                     &rule[i].pattern);
    }

    if (deny) {
        return NGX_OK;
    }

    return ngx_pty_policy_refuse(pol, "not_allowed",
                                 "the command matches no pty_allow rule");
#else

    (void) rules;
    (void) line;
    (void) pol;
    (void) deny;

    return NGX_OK;

#endif
}


/*
 * argv[0] as execvp() would find it, in the PATH the program gets
 * (pty_env PATH=... or the default), done here so that what runs is
 * what was checked.  A name with a slash must be an absolute path:
 * a relative one would depend on the directory the program starts in.
 */
static ngx_int_t
ngx_pty_policy_resolve(ngx_pty_loc_conf_t *plcf, ngx_pool_t *pool,
    ngx_pty_policy_t *pol)
{
    u_char      *p, *dir, *end, *last, *path;
    size_t       n, nlen;
    ngx_str_t    env, *e;
    ngx_uint_t   i;
    u_char       name[NGX_PTY_LOG_STR];

    ngx_str_set(&env, NGX_PTY_PATH);

    if (plcf->env) {
        e = plcf->env->elts;

        for (i = 0; i < plcf->env->nelts; i++) {
            if (e[i].len >= 5 && ngx_strncmp(e[i].data, "PATH=", 5) == 0) {
                env.data = e[i].data + 5;
                env.len = e[i].len - 5;
            }
        }
    }

    p = (u_char *) pol->argv[0];
    nlen = ngx_strlen(p);
    n = ngx_pty_log_escape(name, sizeof(name), p, nlen);

    if (ngx_strlchr(p, p + nlen, '/')) {
        if (*p == '/' && ngx_pty_policy_executable((char *) p) == NGX_OK) {
            pol->path = (char *) p;
            return NGX_OK;
        }

        return ngx_pty_policy_refuse(pol, "unknown_program",
                                     "\"%*s\" is not an executable file "
                                     "given by its absolute path", n, name);
    }

    path = ngx_pnalloc(pool, env.len + nlen + 2);
    if (path == NULL) {
        return NGX_ERROR;
    }

    last = env.data + env.len;

    for (dir = env.data; nlen && dir < last; dir = end + 1) {
        end = ngx_strlchr(dir, last, ':');
        if (end == NULL) {
            end = last;
        }

        /* an empty or relative directory is the current one: never */
        if (end == dir || *dir != '/') {
            continue;
        }

        p = ngx_cpymem(path, dir, end - dir);
        *p++ = '/';
        p = ngx_cpymem(p, pol->argv[0], nlen);
        *p = '\0';

        if (ngx_pty_policy_executable((char *) path) == NGX_OK) {
            pol->path = (char *) path;
            return NGX_OK;
        }
    }

    return ngx_pty_policy_refuse(pol, "unknown_program",
                                 "\"%*s\" is not an executable file in PATH",
                                 n, name);
}


static ngx_int_t
ngx_pty_policy_executable(const char *path)
{
    struct stat  st;

    if (stat(path, &st) == -1 || !S_ISREG(st.st_mode)
        || access(path, X_OK) == -1)
    {
        return NGX_DECLINED;
    }

    return NGX_OK;
}


char **
ngx_pty_policy_argv_copy(ngx_pool_t *pool, char **argv)
{
    char       **copy;
    size_t       len;
    ngx_uint_t   i, n;

    for (n = 0; argv[n]; n++) { /* void */ }

    copy = ngx_palloc(pool, (n + 1) * sizeof(char *));
    if (copy == NULL) {
        return NULL;
    }

    for (i = 0; i < n; i++) {
        len = ngx_strlen(argv[i]) + 1;

        copy[i] = ngx_pnalloc(pool, len);
        if (copy[i] == NULL) {
            return NULL;
        }

        ngx_memcpy(copy[i], argv[i], len);
    }

    copy[n] = NULL;

    return copy;
}
