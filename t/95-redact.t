#!/usr/bin/perl

# pty_redact: each built-in kind of secret, an operator pattern and a
# literal secret from a file are masked as the terminal is read, one
# split across two reads too, so that the live stream, a late joiner's
# Keyframe, the agent's screen and text, and the archive's transcript
# show the same mask and never the secret; ordinary output is untouched.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Time::HiRes qw(time sleep);
use MIME::Base64 qw(decode_base64);
use JSON::PP ();
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyWS qw(session_frame_kind decode_output);

my %secrets = (
    'aws key id' => 'AKIAIOSFODNN7EXAMPLE',
    'aws secret' => 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
    'github token' => 'ghp_' . ('a1B2c3D4e5' x 3) . 'f6G7h8',
    'github fine-grained' => 'github_pat_' . ('11ABCDEFG0' x 3),
    'gitlab token' => 'glpat-' . ('xY9_zW8-vU' x 2),
    'slack token' => 'xoxb-1234567890-abcdefghijkl',
    'jwt' => 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.'
        . 'dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U',
    'password=' => 'sup3r-s3cret-pw',
    'api_key:' => 'k3y-0f-the-api-42',
    'operator pattern' => 'CUSTOM-314159',
    'literal secret' => 'hunter2-literal!',
);
my $pem = "-----BEGIN RSA PRIVATE KEY-----\n"
    . "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n"
    . "KUpRKfFLfRYC9AIKjbJTWit+CqvjWYzvQwECAwEAAQJAIJLixBy2qpFoS4DSmoEm\n"
    . "-----END RSA PRIVATE KEY-----";

my $t = pty_nginx(
    extra_http => 'pty_archive %%TESTDIR%%/arch/pty.db batch=20ms;'
        . ' pty_redact_pattern "CUSTOM-[0-9]{6}";'
        . ' pty_redact_secrets %%TESTDIR%%/secrets.txt;'
        # the split below must not wait on a busy machine's scheduling
        . ' pty_redact_wait 3s;',
    extra_loc => 'pty_redact on;');
my $dir = $t->testdir;
mkdir("$dir/arch") or die "mkdir: $!\n";
chmod(0777, "$dir/arch");
$t->write_file('secrets.txt', "hunter2-literal!\n");

# the program prints them; its command line does not hold them
my $script = "echo 'before: hello world'\n";
for my $k (sort keys %secrets) {
    my $v = $secrets{$k};
    my $line = $k eq 'password=' ? "password=$v"
        : $k eq 'api_key:' ? "api_key: $v"
        : $k eq 'aws secret' ? "aws_secret_access_key = $v" : "token $v";
    $script .= "printf '%s\\n' '$line'\n";
}
$script .= "printf '%s\\n' '$_'\n" for split /\n/, $pem;
# one split across two reads, the second 10 ms later
$script .= "printf 'split AKIAJ7Q2'; sleep 0.01; printf 'EXAMPLE4SPLT\\n'\n";
$script .= "echo 'after: hello world'\nexec cat\n";
$t->write_file('show.sh', $script);
chmod(0755, "$dir/show.sh");

$t->plan(10)->run();

my $port = $t->port(8080);
my $s = start_session($t, "bash $dir/show.sh", cols => 200, rows => 50);
# wait for the end of it, then replay all of it
my $deadline = time + 10;
while (time < $deadline) {
    my ($st, $r) = api_call($port, '/pty/read', { id => $s->{id} });
    last if JSON::PP->new->encode($r) =~ /after: hello world/;
    sleep 0.1;
}
my ($ws, undef, @replayed) = attach_join($t, $s, replay_from => 0);
my $out = join '', map { decode_output($_) } @replayed;
$out =~ /after: hello world/ or $ws->recv_until(sub {
    $out .= decode_output($_[0]);
    $out =~ /after: hello world/ }, 10);

my @all = (values %secrets, 'AKIAJ7Q2EXAMPLE4SPLT', 'MIIBOgIBAAJBAKj34',
    'EXAMPLE4SPLT');
sub leaks {
    my ($text) = @_;
    return grep { index($text, $_) >= 0 } @all;
}

like($out, qr/before: hello world.*after: hello world/s,
    'ordinary output is untouched') or diag $out;
is_deeply([leaks($out)], [], 'no secret in the live stream');
my $marks = () = $out =~ /\[REDACTED\]\**/g;
cmp_ok($marks, '>=', scalar(keys %secrets) + 2,
    'each one masked where it was');
like($out, qr/split \[REDACTED\]\*+/, 'the one split across reads too');

# a late joiner's Keyframe
my ($ws2, $hello, @flush) = attach_join($t, $s, role => 'observer');
my $kf = (grep { (session_frame_kind($_) // '') eq 'Keyframe' } @flush)[0];
my $snap = decode_base64($kf->{payload}{snapshot});
like($snap, qr/REDACTED/, 'the Keyframe shows the mask');
is_deeply([leaks($snap)], [], 'and no secret');

# the agent's screen and text
my ($st, $j) = api_call($port, '/pty/read', { id => $s->{id} });
is_deeply([leaks(JSON::PP->new->canonical->encode($j))], [],
    'no secret in the agent\'s screen');
($st, $j) = api_call($port, '/pty/write', { id => $s->{id}, input => '' });
is_deeply([leaks($j->{output} // '')], [], 'nor in its text');

# the archive
$deadline = time + 10;
my $tr;
while (time < $deadline) {
    ($st, $tr) = api_call($port, '/pty/transcript',
        { id => $s->{id}, limit => 10000, text => JSON::PP::true() });
    last if $st == 200 && ($tr->{text} // '') =~ /after: hello world/;
    sleep 0.1;
}
like($tr->{text}, qr/REDACTED/, 'the archive has the mask');
is_deeply([leaks(JSON::PP->new->canonical->encode($tr))], [],
    'and no secret');
