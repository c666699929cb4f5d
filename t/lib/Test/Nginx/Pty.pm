package Test::Nginx::Pty;

# Test::Nginx::Pty - what most ngx_pty_module tests share: a standard
# config, starting sessions through the agent API, attaching and joining.
#
#   my $t = pty_nginx(extra_http => '...', extra_loc => '...');
#   $t->plan(N)->run();
#   my $s = start_session($t, 'bash');            # API answer (hashref)
#   my ($ws, $hello, @flush) = attach_join($t, $s, role => 'controller');
#   my $out = read_output($ws, qr/\$ $/);         # decoded Output bytes

use strict;
use warnings;

use Exporter qw(import);
use MIME::Base64 qw(encode_base64);
use Test::More ();
use Time::HiRes ();

use Test::Nginx;
use Test::Nginx::PtyWS qw(decode_output session_frame_kind);
use Test::Nginx::PtyAPI qw(api_call);

our @EXPORT = qw(procs_running pty_nginx start_session attach attach_join send_input
    read_output kinds wait_kind EXT_URI attach_workers join_session
    archive_dir archive_conf
    worker_of start_ticker joiner_keyframe);

use constant EXT_URI =>
    'https://agentic-sandbox.aiwg.io/extensions/pty-extensions/v1';

# A config with the zone, the attach and API locations; %opts add to it.
# The locations are open (pty_auth off) unless auth => '...' gives the
# http-level auth lines instead (t/70-auth.t).
sub pty_nginx {
    my (%opts) = @_;
    my $t = Test::Nginx->new()->has(qw/http/);
    $t->workers($opts{workers}) if $opts{workers};
    # several workers need a master, whatever TEST_NGINX_MASTER_PROCESS says
    $t->master_process('on') if ($opts{workers} // 0) > 1;

    my $loc = $opts{extra_loc} // '';
    my $http = $opts{extra_http} // '';
    # archive => '...': pty_archive in the test directory with these
    # parameters, its directory made writable for the workers
    if (defined $opts{archive}) {
        $http = "pty_archive %%TESTDIR%%/arch/pty.db $opts{archive};\n$http";
        mkdir($t->testdir . '/arch') or die "mkdir: $!\n";
        chmod(0777, $t->testdir . '/arch');
    }
    # reuseport: the kernel spreads connections over every worker;
    # listen_opts: more parameters of the listen directive (sndbuf=...)
    my $listen = $opts{reuseport} ? ' reuseport' : '';
    $listen .= " $opts{listen_opts}" if $opts{listen_opts};
    my $conf = <<'CONF';
%%TEST_GLOBALS%%

events {}

http {
    %%TEST_GLOBALS_HTTP%%

    pty_zone pty:@ZONE@;
    pty_instance_id test;

    # the tests must not depend on the profile of whoever runs them (with
    # master_process off the programs run as that user, root included)
    pty_env HOME=%%TESTDIR%%;
    @USERS@
    @AUTH@
    @HTTP@

    server {
        listen 127.0.0.1:%%PORT_8080%%@LISTEN@;
        client_body_buffer_size 1m;
        @SERVER@

        location /agents/ {
            pty_attach;
            @LOC@
        }

        location /pty/ {
            pty_api;
            @LOC@
        }
    }
}
CONF
    # programs never run as the workers' user: a uid per session, as in
    # production, unless the test names its own
    my $users = ($http =~ /pty_user/ || $> != 0) ? ''
        : 'pty_user_range 3000000 3009999;';
    $conf =~ s/\@USERS\@/$users/g;
    my $auth = $opts{auth} // 'pty_auth off;';
    $conf =~ s/\@AUTH\@/$auth/g;
    $conf =~ s/\@HTTP\@/$http/g;
    $conf =~ s/\@LOC\@/$loc/g;
    $conf =~ s/\@SERVER\@/$opts{extra_server} \/\/ ''/ge;
    $conf =~ s/\@LISTEN\@/$listen/g;
    $conf =~ s/\@ZONE\@/$opts{zone} \/\/ '32m'/ge;
    $t->write_file_expand('nginx.conf', $conf);
    return $t;
}

# answers at once (wait_ms 0): attach tests want the output on the socket,
# not settled into the start answer
sub start_session {
    my ($t, $command, %opts) = @_;
    my ($status, $json, $body) = api_call($t->port(8080), '/pty/start',
        { command => $command, wait_ms => 0, %opts });
    die "start failed: " . ($status // 'no answer') . " " . ($body // '')
        . "\n" unless defined $status && $status == 200;
    return $json;
}

sub attach {
    my ($t, $s, %opts) = @_;
    return Test::Nginx::PtyWS->connect(port => $t->port(8080),
        path => $s->{attach_path}, %opts);
}

# Attaches and joins; returns the socket, binding_hello and the frames of
# the initial flush up to and including the Keyframe.
sub attach_join {
    my ($t, $s, %opts) = @_;
    my $ws = attach($t, $s);
    die "attach failed: " . ($ws->status // 'none') . "\n"
        unless $ws->upgraded;
    my $hello = $ws->recv_json(5);
    my %env = (extensions => [EXT_URI]);
    $env{replay_from} = defined $opts{replay_from} ? 0 + $opts{replay_from}
        : undef if exists $opts{replay_from};
    my %payload = (role => $opts{role} // 'controller');
    $payload{client_label} = $opts{label} if defined $opts{label};
    $payload{cols} = $opts{cols} if $opts{cols};
    $payload{rows} = $opts{rows} if $opts{rows};
    $ws->send_json({ op => 'pty.join_session', payload => \%payload, %env });

    # retry_goodbye: a worker that is shutting down may take the join and
    # say goodbye at once; the client then joins again, as a real one does
    my $bye = sub { $opts{retry_goodbye}
        && ($_[0]{op} // '') eq 'binding_goodbye' };
    my $keyframe = joiner_keyframe();
    my @flush = $ws->recv_until(sub { $keyframe->($_[0]) || $bye->($_[0]) },
        10);
    if (@flush && $bye->($flush[-1]) && ($opts{tries} // 0) < 20) {
        $ws->disconnect;
        Time::HiRes::sleep(0.1);
        return attach_join($t, $s, %opts, tries => ($opts{tries} // 0) + 1);
    }
    return ($ws, $hello, @flush);
}

# A session printing "tick N" every 30 ms and answering each input line
# with "got LINE"; returns the API answer and the pid of its owner.
sub start_ticker {
    my ($t) = @_;
    my ($status, $json, $body, $h) = api_call($t->port(8080), '/pty/start', {
        command => 'stty -echo; (i=0; while :; do echo "tick $i"; '
            . 'i=$((i+1)); sleep 0.03; done) & '
            . 'while read l; do echo "got $l"; done',
        wait_ms => 0 });
    die "start failed: " . ($status // 'no answer') . "\n"
        unless defined $status && $status == 200;
    return ($json, $h->{'x-pty-worker'});
}

# The pid of the worker that answered (X-Pty-Worker), of a socket or an
# API answer's headers.
sub worker_of {
    my ($x) = @_;
    return ref $x eq 'HASH' ? $x->{'x-pty-worker'}
        : $x->response_header('X-Pty-Worker');
}

# Attaches until $n connections are served by $n different workers (the
# config must use reuseport); returns [ws, hello, worker pid] for each.
sub attach_workers {
    my ($t, $s, $n, %opts) = @_;
    my (%by, @spare);
    for (1 .. 400) {
        last if keys %by >= $n;
        my $ws = attach($t, $s);
        die "attach failed: " . ($ws->status // 'none') . "\n"
            unless $ws->upgraded;
        my $pid = worker_of($ws);
        if ($by{$pid} || ($opts{not} && $opts{not}{$pid})) {
            push @spare, $ws;
            next;
        }
        $by{$pid} = [$ws, $ws->recv_json(5), $pid];
    }
    $_->close for @spare;
    return map { $by{$_} } sort keys %by;
}

# join on an attached socket; returns the frames up to the Keyframe
sub join_session {
    my ($ws, %opts) = @_;
    my %env = (extensions => [EXT_URI]);
    $env{replay_from} = 0 + $opts{replay_from} if defined $opts{replay_from};
    my %payload = (role => $opts{role} // 'observer');
    $payload{client_label} = $opts{label} if defined $opts{label};
    $ws->send_json({ op => 'pty.join_session', payload => \%payload, %env });
    return if $opts{no_wait};
    return $ws->recv_until(joiner_keyframe(), 10);
}

# A recv_until test for a joiner's own Keyframe: it comes after the
# joiner's RoleAssigned, which comes first; a replay may hold the
# session's periodic Keyframes before it (t/95-redact-scopes, in a loop)
sub joiner_keyframe {
    my $ra;
    return sub {
        my $k = session_frame_kind($_[0]) // '';
        $ra //= $_[0]{sequence} if $k eq 'RoleAssigned';
        return $k eq 'Keyframe' && defined $ra && $_[0]{sequence} > $ra;
    };
}

sub send_input {
    my ($ws, $bytes) = @_;
    return $ws->send_op('pty.session_input',
        { data => encode_base64($bytes, '') });
}

# Collects Output bytes until they match $re; returns them.
sub read_output {
    my ($ws, $re, $timeout) = @_;
    my $out = '';
    $ws->recv_until(sub {
        $out .= decode_output($_[0]);
        $out =~ $re;
    }, $timeout // 10);
    return $out;
}

sub kinds {
    return map { session_frame_kind($_) // $_->{op} } @_;
}

sub wait_kind {
    my ($ws, $kind, $timeout) = @_;
    my @f = $ws->recv_until(sub {
        (session_frame_kind($_[0]) // '') eq $kind }, $timeout // 10);
    return wantarray ? @f : $f[-1];
}

# A directory for pty_archive's file that the workers' user may write;
# returns its path.
sub archive_dir {
    my ($t) = @_;
    my $dir = $t->testdir . '/arch';
    mkdir $dir;
    chmod 0777, $dir;
    return $dir;
}

# nginx.conf from $template with @ARCHIVE@ as pty_archive (batches of
# 20 ms) when $on, as nothing otherwise
sub archive_conf {
    my ($t, $template, $on) = @_;
    my $dir = archive_dir($t);
    (my $c = $template) =~ s{\@ARCHIVE\@}{$on
        ? "pty_archive $dir/pty.db batch=20ms;" : ''}e;
    $t->write_file('nginx.conf', $c);
}

# pids of the live processes whose command line is exactly $cmd
sub procs_running {
    my ($cmd) = @_;
    my @pids;
    for my $dir (glob '/proc/[0-9]*') {
        open my $fh, '<', "$dir/cmdline" or next;
        my $line = do { local $/; <$fh> } // '';
        $line =~ tr/\0/ /;
        $line =~ s/\s+$//;
        push @pids, $dir =~ m{(\d+)$} if $line eq $cmd;
    }
    return @pids;
}

1;
