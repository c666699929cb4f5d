package Test::Nginx::PtyArchive;

# Test::Nginx::PtyArchive - what the archive tests share.
#
#   my $dir = archive_dir($t);            # a directory the workers own
#   my $t = pty_nginx(extra_http => archive_conf($t, 'prune=...'));
#   my @rows = sql($t, 'SELECT seq, kind FROM frames');   # [[1, 1], ...]
#   wait_stored($t, $session_id, $seq);   # the writer stored up to $seq
#
# The database is read with the sqlite3 program as the workers' user, so
# that nothing it makes beside the database (the WAL's index) belongs to
# another user than the writer's.

use strict;
use warnings;

use Exporter qw(import);
use POSIX ();

our @EXPORT = qw(archive_dir archive_db sql sql_one wait_stored
    workers_uid archive_writer);

sub workers_uid {
    return $> == 0 ? scalar((getpwnam('nobody'))[2]) : $>;
}

sub workers_gid {
    return $> == 0 ? scalar((getpwnam('nobody'))[3]) : $);
}

# the directory of the database, writable by the workers' user only
sub archive_dir {
    my ($t, $name) = @_;
    my $dir = $t->testdir . '/' . ($name // 'archive');
    mkdir $dir unless -d $dir;
    chown workers_uid(), workers_gid(), $dir;
    chmod 0700, $dir;
    return $dir;
}

# the pid of the archive writer that has this test's database open
sub archive_writer {
    my ($t) = @_;
    my $dir = $t->testdir;
    for my $proc (glob '/proc/[0-9]*') {
        open my $fh, '<', "$proc/cmdline" or next;
        my $cmd = do { local $/; <$fh> } // '';
        next unless $cmd =~ /^nginx: pty archive writer/;
        for my $fd (glob "$proc/fd/*") {
            my $l = readlink($fd) // next;
            return ($proc =~ m{(\d+)$})[0] if index($l, "$dir/") == 0;
        }
    }
    return undef;
}

sub archive_db {
    my ($t) = @_;
    return archive_dir($t) . '/pty.db';
}

# rows of a query, each an array of its columns ('|' separated by sqlite3)
sub sql {
    my ($t, $query, $db) = @_;
    $db //= archive_db($t);
    pipe(my $r, my $w) or die "pipe: $!";
    my $pid = fork() // die "fork: $!";
    if ($pid == 0) {
        close $r;
        open STDOUT, '>&', $w;
        open STDERR, '>&', $w;
        if ($> == 0) {
            POSIX::setgid(workers_gid());
            POSIX::setuid(workers_uid());
        }
        { exec 'sqlite3', '-batch', '-cmd', '.timeout 5000', $db, $query; }
        POSIX::_exit(127);
    }
    close $w;
    my @rows = map { chomp; [ split /\|/, $_, -1 ] } <$r>;
    close $r;
    waitpid($pid, 0);
    die "sqlite3 failed ($?): " . join("\n", map { join '|', @$_ } @rows)
        . "\n" if $?;
    return @rows;
}

sub sql_one {
    my ($t, $query, $db) = @_;
    my @rows = sql($t, $query, $db);
    return @rows ? $rows[0][0] : undef;
}

# waits until the session's frames up to $seq are in the database
sub wait_stored {
    my ($t, $id, $seq, $timeout) = @_;
    return $t->wait_until(sub {
        my $n = eval { sql_one($t, "SELECT max(seq) FROM frames f JOIN "
            . "sessions s ON s.sid = f.sid WHERE s.uuid = '$id'") };
        defined $n && $n ne '' && $n >= $seq;
    }, $timeout // 10);
}

1;
