
/*
 * What SQLite alone costs to store terminal output the way the archive
 * does (t/bench/archive.pl): MiB of 4 KiB rows, a transaction per
 * 256 KiB, WAL, 16 KiB pages and the writer's pragmas.  Prints the CPU
 * milliseconds per MiB it took, checkpoints included.
 *
 *   sqlfloor FILE MIB
 */

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>


#define FRAME  4096
#define BATCH  (256 * 1024 / FRAME)


static double
cpu_seconds(void)
{
    struct rusage  ru;

    getrusage(RUSAGE_SELF, &ru);

    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec
           + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}


static void
fail(sqlite3 *db, const char *what)
{
    fprintf(stderr, "sqlfloor: %s: %s\n", what, sqlite3_errmsg(db));
    exit(1);
}


int
main(int argc, char **argv)
{
    int            k;
    long           i, n;
    double         start;
    sqlite3       *db;
    sqlite3_stmt  *st;
    unsigned char  data[FRAME], id[16];

    if (argc != 3) {
        fprintf(stderr, "usage: sqlfloor FILE MIB\n");
        return 2;
    }

    unlink(argv[1]);
    n = atol(argv[2]) * 1024 * 1024 / FRAME;

    for (i = 0; i < FRAME; i++) {
        data[i] = (i % 61 == 60) ? '\n' : 'a' + i % 26;
    }

    memset(id, 7, sizeof(id));

    if (sqlite3_open(argv[1], &db) != SQLITE_OK
        || sqlite3_exec(db, "PRAGMA page_size = 16384;"
                        "PRAGMA journal_mode = WAL;"
                        "PRAGMA synchronous = NORMAL;"
                        "PRAGMA wal_autocheckpoint = 512;"
                        "PRAGMA cache_size = -16384;"
                        "CREATE TABLE f (sid INTEGER, seq INTEGER, ts INTEGER,"
                        " kind INTEGER, target INTEGER, anchor INTEGER,"
                        " cols INTEGER, rows INTEGER, uuid BLOB, enc INTEGER,"
                        " data BLOB, PRIMARY KEY (sid, seq))",
                        NULL, NULL, NULL) != SQLITE_OK
        || sqlite3_prepare_v2(db, "INSERT OR IGNORE INTO f VALUES"
                              " (1, ?, 0, 1, 0, ?, 0, 0, ?, 0, ?)", -1, &st,
                              NULL) != SQLITE_OK)
    {
        fail(db, "opening");
    }

    start = cpu_seconds();

    for (i = 0; i < n; /* void */) {
        if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        {
            fail(db, "begin");
        }

        for (k = 0; k < BATCH && i < n; k++, i++) {
            sqlite3_bind_int64(st, 1, i + 1);
            sqlite3_bind_int64(st, 2, i * FRAME);
            sqlite3_bind_blob(st, 3, id, sizeof(id), SQLITE_STATIC);
            sqlite3_bind_blob(st, 4, data, FRAME, SQLITE_STATIC);

            if (sqlite3_step(st) != SQLITE_DONE) {
                fail(db, "insert");
            }

            sqlite3_reset(st);
        }

        if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
            fail(db, "commit");
        }
    }

    printf("%.2f\n", (cpu_seconds() - start) * 1000 / atol(argv[2]));

    sqlite3_finalize(st);
    sqlite3_close(db);
    unlink(argv[1]);

    return 0;
}
