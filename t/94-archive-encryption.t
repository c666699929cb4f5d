#!/usr/bin/perl

# pty_archive_key: frames are stored sealed (AES-256-GCM), so the file
# holds no output in clear, and read back identical with the key.  A new
# key listed first seals new rows while the old one still opens old rows;
# a row whose key is no longer listed is a clear error, never garbage; a
# missing or malformed key file fails nginx -t, naming the file.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Time::HiRes qw(time sleep);
use JSON::PP ();
use MIME::Base64 ();
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(extra_http => 'pty_archive %%TESTDIR%%/arch/pty.db'
    . ' batch=20ms; @KEYS@');
my $dir = $t->testdir;
mkdir("$dir/arch") or die "mkdir: $!\n";
chmod(0777, "$dir/arch");
$t->write_file('a.key', join('', map { sprintf '%02x', $_ } 1 .. 32) . "\n");
$t->write_file('b.key', join('', map { chr(200 + $_) } 1 .. 32));
$t->write_file('short.key', 'abcd');
chmod(0600, "$dir/a.key", "$dir/b.key");
my $conf = $t->read_file('nginx.conf');

sub with_keys {
    my (@keys) = @_;
    (my $c = $conf) =~ s{\@KEYS\@}{join ' ',
        map { "pty_archive_key $dir/$_;" } @keys}e;
    $t->write_file('nginx.conf', $c);
}

with_keys('a.key');
$t->allow_log(qr/no pty_archive_key holds/);
$t->plan(14)->run();

my $port = $t->port(8080);

sub transcript {
    my ($id) = @_;
    return api_call($port, '/pty/transcript',
        { id => $id, limit => 10000, text => JSON::PP::true() });
}

sub ended {
    my ($id) = @_;
    my $deadline = time + 10 * Test::Nginx::timeout_scale();
    my ($st, $j);
    while (time < $deadline) {
        ($st, $j) = transcript($id);
        # stored whole: the text is the archive's, which follows a batch
        return $j if $st == 200 && $j->{state} eq 'exited'
            && ($j->{text} // '') ne ''
            && grep { ($_->{payload}{kind} // '') eq 'Closed' }
                @{$j->{frames}};
        sleep 0.1;
    }
    diag "transcript of $id: " . ($st // 'none') . ' '
        . JSON::PP->new->canonical->encode($j // {});
    return;
}

# the marker is made by the program: the command line does not hold it
my $s1 = start_session($t, 'echo SECRET-MARKER-$((6*7))-ONE');
my $before = ended($s1->{id});
like($before && $before->{text}, qr/SECRET-MARKER-42-ONE/,
    'a session with a secret in its output');

$t->stop();

sub rows {
    my $py = 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); '
        . 'print("\n".join("%d %d %d" % (r[0], r[1], '
        . 'b"SECRET-MARKER" in r[2]) for r in c.execute('
        . '"SELECT sid, enc, data FROM frames")))';
    return map { [split ' '] } split /\n/, `python3 -c '$py' $dir/arch/pty.db`;
}
my @rows = rows();
ok(@rows && !(grep { $_->[1] == 0 && $_->[0] == 1 } @rows),
    'every frame of it is sealed');
ok(!(grep { $_->[2] } @rows), 'no row holds the secret in clear');
my $raw = join '', map { $t->read_file("arch/$_") // '' }
    qw(pty.db pty.db-wal);
unlike($raw, qr/SECRET-MARKER/, 'nor does the file');

$t->run();
my $after = ended($s1->{id});
is_deeply($after->{frames}, $before->{frames},
    'read back with the key: the same frames');
is($after->{text}, $before->{text}, 'and the same text');

# many sealed frames of every size, read back in pages: each exactly
my $s3 = start_session($t, 'seq 1 20000');
ended($s3->{id});
my ($from, $bytes, $frames) = (1, '', 0);
while (defined $from) {
    my ($st3, $j3) = api_call($port, '/pty/transcript',
        { id => $s3->{id}, from => $from, limit => 700 });
    last unless $st3 == 200;
    for (@{$j3->{frames}}) {
        next unless ($_->{payload}{kind} // '') eq 'Output';
        $bytes .= MIME::Base64::decode_base64($_->{payload}{data});
        $frames++;
    }
    $from = $j3->{next};
}
is($bytes, join('', map { "$_\r\n" } 1 .. 20000),
    "$frames sealed Output frames of many sizes read back exactly");

# a new key first: new rows sealed with it, old ones still open
$t->stop();
with_keys('b.key', 'a.key');
$t->run();
my $s2 = start_session($t, 'echo SECRET-MARKER-$((6*7))-TWO');
like(ended($s2->{id})->{text}, qr/SECRET-MARKER-42-TWO/,
    'a new session with the new key');
is_deeply(ended($s1->{id})->{frames}, $before->{frames},
    'the old one still opens with the old key');
$t->stop();
my %keys = map { $_->[0] => $_->[1] } grep { $_->[1] } rows();
# sids: 1 and 2 sealed with the first key, 3 (the new session) the new one
ok($keys{1} && $keys{1} == $keys{2} && $keys{3} && $keys{3} != $keys{1},
    'each session\'s rows name their own key');

# the old key gone: its rows are an error, not garbage
with_keys('b.key');
$t->run();
my ($st, $j) = transcript($s1->{id});
is($st, 503, 'a row whose key is gone is refused');
like($j->{error}{message}, qr/stored with key \d+, which no pty_archive_key/,
    'saying which key it needs');

# nginx -t names a missing or malformed key file
for my $bad ('missing.key', 'short.key') {
    (my $c = $conf) =~ s{\@KEYS\@}{pty_archive_key $dir/$bad;};
    $t->write_file('bad.conf', $c);
    my (undef, $out) = $t->test_config('bad.conf');
    like($out, qr/pty_archive_key: .*"\Q$dir\/$bad\E"/,
        "nginx -t names $bad");
}
