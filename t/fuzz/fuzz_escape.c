
/*
 * libFuzzer harness: the agent API's input escape decoder
 * (src/ngx_pty_escape.c).  Invariants: the output never exceeds the input,
 * decoding in place gives the same bytes, and input without a backslash
 * comes out unchanged.
 */

#include <string.h>

#include "fuzz.h"
#include "ngx_pty_escape.h"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    u_char  *out, *inplace;
    size_t   n, m;

    /* exact-size copies: any read or write past size is caught */
    out = malloc(size ? size : 1);
    inplace = malloc(size ? size : 1);
    if (out == NULL || inplace == NULL) {
        free(out);
        free(inplace);
        return 0;
    }

    memcpy(inplace, data, size);

    n = ngx_pty_escape_decode(out, data, size);
    fuzz_assert(n <= size);

    m = ngx_pty_escape_decode(inplace, inplace, size);
    fuzz_assert(m == n);
    fuzz_assert(memcmp(out, inplace, n) == 0);

    if (memchr(data, '\\', size) == NULL) {
        fuzz_assert(n == size && memcmp(out, data, size) == 0);
    }

    free(out);
    free(inplace);

    return 0;
}
