package Test::Nginx;

# Test::Nginx - minimal nginx test harness for ngx_pty_module.
#
# Mirrors the public API of nginx-tests' lib/Test/Nginx.pm (new, has, plan,
# write_file_expand, run, stop, reload, port, waitforsocket, http_get, http,
# ...) but is an independent implementation using only Perl core modules.
#
#   use Test::More;
#   use FindBin; use lib "$FindBin::Bin/lib";
#   use Test::Nginx;
#   my $t = Test::Nginx->new()->has(qw/http/)->plan(5);
#   $t->write_file_expand('nginx.conf', $conf);   # %%TEST_GLOBALS%% etc.
#   $t->run();
#   like(http_get('/'), qr/ok/, 'works');
#
# Automatic log check
#   Every instance emits ONE extra test "no alerts in error.log" the first
#   time nginx is stopped (explicit $t->stop, or at END).  plan(N) therefore
#   plans N+1 tests.  The check fails when error.log / nginx's stderr /
#   valgrind logs contain [alert], [emerg], [crit], sanitizer reports or
#   valgrind errors, or when nginx ignored QUIT.  Expected lines can be
#   tolerated with $t->allow_log(qr/.../).  Later stop()s (after a second
#   run()) only emit a test when they find a problem.  If the test already
#   finished (done_testing called before nginx stopped) problems are reported
#   with diag and the exit code is forced to non-zero.  For done_testing style
#   tests prefer $t->done_testing, which stops nginx, checks and finishes.
#
# Environment
#   TEST_NGINX_BINARY          nginx binary (default /usr/sbin/nginx)
#   TEST_NGINX_MODULE          module .so (default <repo>/build/ngx_pty_module.so)
#   TEST_NGINX_WORKERS         worker_processes (default 2; explicit workers() wins)
#   TEST_NGINX_MASTER_PROCESS  "off" to run with master_process off
#   TEST_NGINX_VERBOSE         error_log level debug, print commands
#   TEST_NGINX_LEAVE           keep the test directory
#   TEST_NGINX_CATLOG          print error.log at stop
#   TEST_NGINX_USE_VALGRIND    run nginx under valgrind (timeouts x10)
#   TEST_NGINX_ASAN            path of the ASan runtime to preload into nginx,
#                              for a module built with the sanitizers (make
#                              test-asan); their reports go to asan.PID and
#                              ubsan.PID in the test directory, which the
#                              log check reads (timeouts x3)

use strict;
use warnings;

use Exporter qw(import);
use Cwd qw(abs_path);
use Errno qw(EINTR);
use File::Basename qw(dirname);
use File::Path qw(rmtree);
use File::Spec;
use File::Temp qw(tempdir);
use IO::Select;
use IO::Socket::INET;
use POSIX qw(:sys_wait_h);
use Scalar::Util qw(weaken);
use Time::HiRes qw(time sleep);
use Test::More ();

our @EXPORT = qw(http_get http_post http port);
our @EXPORT_OK = qw(http_get http_post http port log_problems timeout_scale);
our $VERSION = '0.01';

# repo root: lib dir is <root>/t/lib, this file is <root>/t/lib/Test/Nginx.pm
our $LIBDIR   = abs_path(File::Spec->catdir(dirname(__FILE__), '..'));
our $REPO_ROOT = abs_path(File::Spec->catdir($LIBDIR, '..', '..'));

our $NGINX  = $ENV{TEST_NGINX_BINARY} || '/usr/sbin/nginx';
our $MODULE = $ENV{TEST_NGINX_MODULE}
    || File::Spec->catfile($REPO_ROOT, 'build', 'ngx_pty_module.so');

# default problem patterns in logs
our @PROBLEM_PATTERNS = (
    qr/\[(?:alert|emerg|crit)\]/,
    qr/ERROR: (?:AddressSanitizer|LeakSanitizer|ThreadSanitizer|MemorySanitizer)/,
    qr/runtime error:/,
    qr/==\d+== (?:Invalid (?:read|write|free)|Conditional jump|Use of uninitialised|Syscall param|Mismatched free|Source and destination overlap)/,
    qr/==\d+== ERROR SUMMARY: [1-9]/,
    qr/^HARNESS: /,
);

my %PORTS;         # N => real port, per process
my %PORT_USED;
my @INSTANCES;     # weak refs for END cleanup
my $FORCE_FAIL = 0;

$SIG{PIPE} = 'IGNORE';

# make INT/TERM (e.g. prove timeouts, ^C) run END so nginx gets stopped
for my $sig (qw(INT TERM HUP)) {
    next if defined $SIG{$sig} && $SIG{$sig} ne 'DEFAULT' && $SIG{$sig} ne '';
    $SIG{$sig} = sub { print STDERR "# caught SIG$sig, stopping nginx\n"; exit 1 };
}

# Become a child subreaper (Linux) so that daemonized nginx masters are
# re-parented to us and can be reaped (PID 1 in containers often does not).
sub _set_subreaper {
    my %nr = (x86_64 => 157, aarch64 => 167, i686 => 172, i386 => 172);
    my ($arch) = $Config::Config{archname} =~ /^([^-]+)/;
    my $n = $nr{$arch // ''} // return 0;
    return syscall($n, 36, 1, 0, 0, 0) == 0;   # PR_SET_CHILD_SUBREAPER
}
{ require Config; _set_subreaper() if $^O eq 'linux'; }

sub verbose { return $ENV{TEST_NGINX_VERBOSE} }
sub valgrind { return $ENV{TEST_NGINX_USE_VALGRIND} }
sub asan { return $ENV{TEST_NGINX_ASAN} }

# multiply deadlines under valgrind and the sanitizers
sub timeout_scale { return valgrind() ? 10 : asan() ? 3 : 1 }

sub vdiag { Test::More::diag(@_) if verbose() }

###############################################################################
# construction / configuration

sub new {
    my ($class, %opts) = @_;

    my $dir = tempdir('nginx-test-XXXXXXXXXX', TMPDIR => 1, CLEANUP => 0);
    # workers (nobody) read it; under valgrind or the sanitizers they log
    # into it
    chmod(valgrind() || asan() ? 01777 : 0755, $dir);

    my $self = bless {
        _testdir      => $dir,
        _templates    => {},
        _workers      => undef,
        _master       => undef,
        _no_module    => 0,
        _allow        => [],
        _has          => {},
        _planned      => 0,
        _check_done   => 0,
        _log_offsets  => {},
        _running      => 0,
        _pid          => undef,
        _child        => undef,
        _problems_extra => [],
        _owner_pid    => $$,
    }, $class;

    push @INSTANCES, $self;
    weaken($INSTANCES[-1]);
    return $self;
}

sub testdir { return $_[0]->{_testdir} }

sub module_path { return $MODULE }

sub binary { return $NGINX }

# record required features; skip only for things we cannot provide
sub has {
    my ($self, @features) = @_;
    for my $f (@features) {
        $self->{_has}{$f} = 1;
        if ($f =~ /^(?:ssl|http_ssl|stream_ssl)$/) {
            $self->_configure_args =~ /--with-http_ssl_module/
                or Test::More::plan(skip_all => "no $f in $NGINX");
        }
        if ($f eq 'stream' && !$self->_has_stream) {
            Test::More::plan(skip_all => "no stream in $NGINX");
        }
    }
    return $self;
}

# skip the whole test unless program is in PATH
sub has_daemon {
    my ($self, $prog) = @_;
    for my $d (File::Spec->path) {
        return $self if -x File::Spec->catfile($d, $prog);
    }
    Test::More::plan(skip_all => "$prog not found");
}

sub skip_all_if {
    my ($self, $cond, $why) = @_;
    Test::More::plan(skip_all => $why) if $cond;
    return $self;
}

# plan(N): plans N + 1 tests (one automatic log check)
sub plan {
    my ($self, $n) = @_;
    Test::More::plan(tests => $n + 1);
    $self->{_planned} = 1;
    return $self;
}

sub workers {
    my ($self, $n) = @_;
    $self->{_workers} = $n;
    return $self;
}

sub master_process {
    my ($self, $on) = @_;
    $self->{_master} = ($on && $on ne 'off') ? 1 : 0;
    return $self;
}

# do not add load_module of ngx_pty_module to %%TEST_GLOBALS%%
sub no_module {
    my ($self, $v) = @_;
    $self->{_no_module} = defined $v ? $v : 1;
    return $self;
}

# tolerate matching lines in the automatic log check
sub allow_log {
    my ($self, @re) = @_;
    push @{$self->{_allow}}, @re;
    return $self;
}

sub _configure_args {
    my ($self) = @_;
    our $CONFIGURE_ARGS;
    $CONFIGURE_ARGS //= `$NGINX -V 2>&1` // '';
    return $CONFIGURE_ARGS;
}

sub _has_stream {
    my ($self) = @_;
    return $self->_configure_args =~ /--with-stream(?!=dynamic)(?:\s|$)/;
}

sub _worker_count {
    my ($self) = @_;
    return $self->{_workers} if defined $self->{_workers};
    return $ENV{TEST_NGINX_WORKERS} if $ENV{TEST_NGINX_WORKERS};
    # any worker serves any session: tests run more than one by default
    return 2;
}

sub _master_on {
    my ($self) = @_;
    return $self->{_master} if defined $self->{_master};
    my $e = $ENV{TEST_NGINX_MASTER_PROCESS};
    return 0 if defined $e && $e =~ /^(?:off|0|no)$/i;
    return 1;
}

###############################################################################
# files

sub write_file {
    my ($self, $name, $content) = @_;
    delete $self->{_templates}{$name};
    return $self->_write($name, $content);
}

sub _write {
    my ($self, $name, $content) = @_;
    my $path = $self->_path($name);
    open my $fh, '>', $path or die "can't write $path: $!\n";
    binmode $fh;
    print $fh $content;
    close $fh or die "can't close $path: $!\n";
    chmod 0644, $path;
    return $path;
}

sub write_file_expand {
    my ($self, $name, $content) = @_;
    my $path = $self->write_file($name, $self->expand($content, $name));
    $self->{_templates}{$name} = $content;
    return $path;
}

sub read_file {
    my ($self, $name) = @_;
    my $path = $self->_path($name);
    open my $fh, '<', $path or return undef;
    binmode $fh;
    local $/;
    my $c = <$fh>;
    close $fh;
    return $c;
}

sub _path {
    my ($self, $name) = @_;
    return $name if File::Spec->file_name_is_absolute($name);
    return File::Spec->catfile($self->{_testdir}, $name);
}

# re-render templates (so workers()/master_process() after
# write_file_expand still take effect)
sub _rewrite_templates {
    my ($self) = @_;
    for my $name (keys %{$self->{_templates}}) {
        $self->_write($name, $self->expand($self->{_templates}{$name}));
    }
}

sub expand {
    my ($self, $content) = @_;
    my $globals = $self->test_globals($content);
    my $http = $self->test_globals_http;
    my $dir = $self->{_testdir};

    $content =~ s/%%TEST_GLOBALS%%/$globals/g;
    $content =~ s/%%TEST_GLOBALS_HTTP%%/$http/g;
    $content =~ s/%%TESTDIR%%/$dir/g;
    $content =~ s/%%PORT_(\d+)%%/port($1)/ge;
    return $content;
}

sub _sets_directive {
    my ($content, $directive) = @_;
    (my $c = $content) =~ s/#[^\n]*//g;
    return $c =~ /(?:^|[;{}\s])\Q$directive\E\s+[^;]*;/m;
}

sub test_globals {
    my ($self, $content) = @_;
    $content //= '';
    my $dir = $self->{_testdir};
    my @g;

    if (!$self->{_no_module}) {
        if (!-e $MODULE && !$self->{_warned_module}++) {
            Test::More::diag("WARNING: module $MODULE does not exist "
                . "(set TEST_NGINX_MODULE or build it)");
        }
        push @g, "load_module $MODULE;";
    }

    # a new binary (USR2) gets only the environment that env names
    push @g, 'env LD_PRELOAD;', 'env ASAN_OPTIONS;', 'env UBSAN_OPTIONS;'
        if asan();
    push @g, "pid $dir/nginx.pid;";
    push @g, "error_log $dir/error.log " . (verbose() ? 'debug' : 'notice') . ';';
    push @g, 'worker_processes ' . $self->_worker_count . ';'
        unless _sets_directive($content, 'worker_processes');
    push @g, 'master_process ' . ($self->_master_on ? 'on' : 'off') . ';'
        unless _sets_directive($content, 'master_process');
    push @g, 'daemon on;'
        unless _sets_directive($content, 'daemon');

    return join "\n", @g;
}

sub test_globals_http {
    my ($self) = @_;
    my $dir = $self->{_testdir};
    my $args = $self->_configure_args;
    my @g = (
        "access_log $dir/access.log;",
        "client_body_temp_path $dir/client_body_temp;",
    );
    push @g, "proxy_temp_path $dir/proxy_temp;"
        unless $args =~ /--without-http_proxy_module/;
    push @g, "fastcgi_temp_path $dir/fastcgi_temp;"
        unless $args =~ /--without-http_fastcgi_module/;
    push @g, "uwsgi_temp_path $dir/uwsgi_temp;"
        unless $args =~ /--without-http_uwsgi_module/;
    push @g, "scgi_temp_path $dir/scgi_temp;"
        unless $args =~ /--without-http_scgi_module/;
    return join "\n    ", @g;
}

###############################################################################
# ports

sub port {
    my ($num) = @_;
    $num = $_[1] if ref $num;        # allow $t->port(N)
    return $PORTS{$num} if $PORTS{$num};

    for (1 .. 100) {
        my $s = IO::Socket::INET->new(
            LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp',
            Listen => 1, ReuseAddr => 0,
        ) or next;
        my $p = $s->sockport;
        close $s;
        next if $PORT_USED{$p}++;
        return $PORTS{$num} = $p;
    }
    die "HARNESS: cannot allocate a free port for $num\n";
}

###############################################################################
# run / stop / reload

sub _conf_text {
    my ($self) = @_;
    return $self->read_file('nginx.conf') // '';
}

sub _listen_addrs {
    my ($self) = @_;
    (my $c = $self->_conf_text) =~ s/#[^\n]*//g;
    my @a;
    while ($c =~ /(?:^|[;{}\s])listen\s+([^;]+);/g) {
        my @w = split ' ', $1;
        next if grep { $_ eq 'udp' } @w;
        my $a = $w[0];
        next if $a =~ /^unix:/;
        if ($a =~ /^\d+$/) { $a = "127.0.0.1:$a" }
        elsif ($a =~ /^\*:(\d+)$/) { $a = "127.0.0.1:$1" }
        elsif ($a =~ /^0\.0\.0\.0:(\d+)$/) { $a = "127.0.0.1:$1" }
        elsif ($a =~ /^\[/) { next }
        elsif ($a !~ /:\d+$/) { next }
        push @a, $a;
    }
    my %seen;
    return grep { !$seen{$_}++ } @a;
}

sub run {
    my ($self, %opts) = @_;
    die "HARNESS: nginx already running\n" if $self->{_running};

    $self->_rewrite_templates;
    die "HARNESS: no nginx.conf written\n" unless -e $self->_path('nginx.conf');

    my $dir = $self->{_testdir};
    unlink "$dir/nginx.pid";

    my @cmd = ($NGINX, '-p', "$dir/", '-c', 'nginx.conf', '-e', "$dir/error.log");
    if (valgrind()) {
        # forks (workers, keepers) are always followed; the programs that
        # sessions exec are not ours to check
        unshift @cmd, 'valgrind', '--trace-children=no', '--leak-check=no',
            '--error-exitcode=42', '--quiet', "--log-file=$dir/valgrind.%p.log";
    }
    vdiag("running: @cmd");

    my $pid = fork() // die "HARNESS: fork: $!\n";
    if ($pid == 0) {
        open STDIN, '<', '/dev/null';
        open STDOUT, '>>', "$dir/stderr.log";
        open STDERR, '>>', "$dir/stderr.log";
        if (asan()) {
            # nginx itself is not instrumented: the runtime must come first;
            # nginx's pools are freed by exit, not one by one: no leak check
            $ENV{LD_PRELOAD} = asan();
            $ENV{ASAN_OPTIONS} = "detect_leaks=0:log_path=$dir/asan";
            $ENV{UBSAN_OPTIONS} = "print_stacktrace=1:log_path=$dir/ubsan";
        }
        exec @cmd or do { print STDERR "exec $cmd[0]: $!\n"; POSIX::_exit(127) };
    }

    my $daemon = !_sets_directive($self->_conf_text, 'daemon')
        || _conf_daemon_on($self->_conf_text);

    $self->{_running} = 1;
    $self->{_child} = $pid;

    my $ok = eval { $self->_wait_started($pid, $daemon); 1 };
    my $err = $@;
    if (!$ok) {
        $self->_kill_everything;
        $self->{_running} = 0;
        my $log = ($self->read_file('error.log') // '')
            . ($self->read_file('stderr.log') // '');
        Test::More::diag("nginx failed to start: $err");
        Test::More::diag("error.log/stderr:\n$log");
        return undef if $opts{try};
        die "HARNESS: nginx failed to start: $err";
    }
    return $self;
}

# run, but skip the whole test if nginx cannot start
sub try_run {
    my ($self, $message) = @_;
    my $ok = eval { $self->run(try => 1) };
    Test::More::plan(skip_all => $message // 'nginx failed to start')
        unless $ok;
    return $self;
}

sub _conf_daemon_on {
    my ($c) = @_;
    $c =~ s/#[^\n]*//g;
    return $c =~ /(?:^|[;{}\s])daemon\s+on\s*;/;
}

sub _wait_started {
    my ($self, $pid, $daemon) = @_;
    my $deadline = time + 10 * timeout_scale();
    my $pidfile = $self->_path('nginx.pid');

    if ($daemon) {
        # launcher exits after daemonizing
        while (1) {
            my $r = waitpid($pid, WNOHANG);
            if ($r == $pid) {
                die "nginx exited with status " . ($? >> 8) . "\n" if $?;
                last;
            }
            die "timeout waiting for nginx to daemonize\n" if time > $deadline;
            sleep 0.01;
        }
        $self->{_child} = undef;
    }

    while (1) {
        if (-s $pidfile) {
            my $p = $self->_read_pid;
            if ($p) { $self->{_pid} = $p; last }
        }
        if (!$daemon) {
            my $r = waitpid($pid, WNOHANG);
            if ($r == $pid) {
                $self->{_child} = undef;
                die "nginx exited with status " . ($? >> 8) . "\n";
            }
        }
        die "timeout waiting for $pidfile\n" if time > $deadline;
        sleep 0.01;
    }

    for my $addr ($self->_listen_addrs) {
        $self->waitforsocket($addr, $deadline - time)
            or die "timeout waiting for $addr\n";
    }

    if ($self->_master_on_in_conf) {
        my $n = $self->_worker_count_in_conf;
        while ($self->worker_pids < $n) {
            die "timeout waiting for $n workers\n" if time > $deadline;
            die "nginx master died\n" unless _alive($self->{_pid});
            sleep 0.01;
        }
    }
}

sub _master_on_in_conf {
    my ($self) = @_;
    (my $c = $self->_conf_text) =~ s/#[^\n]*//g;
    return $c !~ /(?:^|[;{}\s])master_process\s+off\s*;/;
}

sub _worker_count_in_conf {
    my ($self) = @_;
    (my $c = $self->_conf_text) =~ s/#[^\n]*//g;
    if ($c =~ /(?:^|[;{}\s])worker_processes\s+(\w+)\s*;/) {
        my $v = $1;
        return $v =~ /^\d+$/ ? $v : 1;    # "auto": at least one
    }
    return 1;
}

sub _read_pid {
    my ($self) = @_;
    my $c = $self->read_file('nginx.pid') // return;
    return $c =~ /^(\d+)/ ? $1 : undef;
}

sub master_pid {
    my ($self) = @_;
    return $self->{_pid};
}

sub is_running {
    my ($self) = @_;
    return $self->{_running} && _alive($self->{_pid});
}

# process alive and not a zombie
sub _alive {
    my ($pid) = @_;
    return 0 unless $pid;
    waitpid($pid, WNOHANG);
    return 0 unless kill 0, $pid;
    my $st = _proc_stat($pid) or return 0;
    return $st->{state} ne 'Z' && $st->{state} ne 'X';
}

sub _proc_stat {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/stat" or return;
    my $l = <$fh>;
    close $fh;
    return unless defined $l && $l =~ /^\d+ \((.*)\) (\S) (\d+)/s;
    return { comm => $1, state => $2, ppid => $3 };
}

sub _cmdline {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/cmdline" or return '';
    local $/;
    my $c = <$fh> // '';
    close $fh;
    $c =~ s/\0+$//;
    $c =~ tr/\0/ /;
    return $c;
}

sub _children {
    my ($ppid) = @_;
    my @c;
    opendir my $d, '/proc' or return;
    for my $p (grep { /^\d+$/ } readdir $d) {
        my $st = _proc_stat($p) or next;
        next unless $st->{ppid} == $ppid;
        next if $st->{state} eq 'Z' || $st->{state} eq 'X';
        push @c, $p;
    }
    closedir $d;
    @c = sort { $a <=> $b } @c;
    return @c;
}

# worker processes of this nginx (children of the master, titled
# "nginx: worker process"; includes ones "is shutting down" if all => 1).
# List context: pids; scalar context: count.
sub worker_pids {
    my ($self, %opts) = @_;
    my $m = $self->{_pid};
    my @w = $m ? _children($m) : ();
    # under valgrind setproctitle() is invisible in /proc: every child counts
    @w = grep {
        my $c = _cmdline($_);
        $opts{all} ? $c =~ /nginx: worker process/
                   : $c =~ /nginx: worker process$/
    } @w unless valgrind();
    return wantarray ? @w : scalar @w;
}

sub all_pids {
    my ($self) = @_;
    my $m = $self->{_pid} or return;
    my @p = ($m, _children($m));
    return @p;
}

# reload(%opts): re-render templates, HUP, wait for a full new worker set and
# (unless wait_old => 0) the old ones to exit.  Returns true on success.
# nginx -t on a config file of the test directory: (exit status, output)
sub test_config {
    my ($self, $name) = @_;
    my $dir = $self->{_testdir};
    my $pre = asan()
        ? 'LD_PRELOAD=' . asan() . ' ASAN_OPTIONS=detect_leaks=0 ' : '';
    my $out = `$pre'$NGINX' -t -p '$dir/' -c '$dir/$name' -e '$dir/t.log' 2>&1`;
    return ($?, $out);
}

sub reload {
    my ($self, %opts) = @_;
    my $timeout = ($opts{timeout} // 10) * timeout_scale();
    $self->_rewrite_templates;

    my $m = $self->{_pid} or die "HARNESS: nginx is not running\n";
    my %old = map { $_ => 1 } $self->worker_pids(all => 1);
    my $n = $self->_worker_count_in_conf;

    vdiag("reload: HUP $m");
    kill 'HUP', $m or die "HARNESS: kill HUP $m: $!\n";

    my $deadline = time + $timeout;
    while (time < $deadline) {
        my @new = grep { !$old{$_} } $self->worker_pids;
        my $old_left = grep { _alive($_) } keys %old;
        if (@new >= $n && (!$old_left || (defined $opts{wait_old} && !$opts{wait_old}))) {
            return 1;
        }
        sleep 0.02;
    }
    Test::More::diag("reload: timeout waiting for new workers / old workers exit");
    return 0;
}

# USR2: the master starts a new binary (the same one here); waits for the
# new master and its workers, which this object follows from then on.
# Returns the old master's pid (still running: QUIT it to finish).
sub binary_upgrade {
    my ($self, %opts) = @_;
    my $old = $self->{_pid} or die "HARNESS: nginx is not running\n";
    my $timeout = $opts{timeout} // 10;

    kill 'USR2', $old;
    my $new = $self->wait_until(sub {
        my $p = -e $self->_path('nginx.pid.oldbin') && $self->_read_pid;
        $p && $p != $old && _alive($p) && _children($p) ? $p : undef;
    }, $timeout) or return;

    $self->{_pid} = $new;
    $self->wait_until(sub {
        scalar($self->worker_pids) >= $self->_worker_count }, $timeout);
    return $old;
}

sub stop {
    my ($self) = @_;

    if ($self->{_running}) {
        $self->_stop_nginx;
        $self->{_running} = 0;
    }
    $self->_check_logs_once;
    return $self;
}

sub _stop_nginx {
    my ($self) = @_;
    my $m = $self->{_pid};
    my @pids = $m ? $self->all_pids : ();
    push @pids, $self->{_child} if $self->{_child};
    my $scale = timeout_scale();

    if ($m && _alive($m)) {
        vdiag("stop: QUIT $m");
        kill 'QUIT', $m;
        unless (_wait_gone(10 * $scale, @pids)) {
            push @{$self->{_problems_extra}},
                "HARNESS: nginx did not exit on QUIT within "
                . (10 * $scale) . "s, sending TERM";
            kill 'TERM', grep { _alive($_) } @pids;
            unless (_wait_gone(5 * $scale, @pids)) {
                push @{$self->{_problems_extra}},
                    "HARNESS: nginx did not exit on TERM, sending KILL";
                kill 'KILL', grep { _alive($_) } @pids;
                _wait_gone(5, @pids);
            }
        }
    }
    $self->_kill_everything;

    if ($self->{_child}) {
        waitpid($self->{_child}, 0);
        $self->{_child} = undef;
    }
    Test::More::diag("error.log:\n" . ($self->read_file('error.log') // ''))
        if $ENV{TEST_NGINX_CATLOG};
}

# last resort: kill any process we know of
sub _kill_everything {
    my ($self) = @_;
    my @p = grep { _alive($_) } ($self->all_pids, $self->{_child} // ());
    return unless @p;
    kill 'KILL', @p;
    _wait_gone(5, @p);
    if ($self->{_child}) { waitpid($self->{_child}, WNOHANG) }
}

sub _wait_gone {
    my ($timeout, @pids) = @_;
    my $deadline = time + $timeout;
    while (time < $deadline) {
        return 1 unless grep { _alive($_) } @pids;
        sleep 0.01;
    }
    return !grep { _alive($_) } @pids;
}

###############################################################################
# log checks

# log_problems($text, @allow_re): lines matching a problem pattern and no
# allow pattern
sub log_problems {
    my ($text, @allow) = @_;
    my @bad;
    for my $line (split /\n/, $text // '') {
        next unless grep { $line =~ $_ } @PROBLEM_PATTERNS;
        next if grep { $line =~ $_ } @allow;
        push @bad, $line;
    }
    return @bad;
}

sub error_log_lines {
    my ($self, $name) = @_;
    my $c = $self->read_file($name // 'error.log') // '';
    return split /\n/, $c;
}

sub grep_error_log {
    my ($self, $re, $name) = @_;
    return grep { $_ =~ $re } $self->error_log_lines($name);
}

# wait until error.log has a line matching $re; returns the line or undef
sub wait_for_log {
    my ($self, $re, $timeout) = @_;
    my $deadline = time + ($timeout // 5) * timeout_scale();
    while (1) {
        my @l = $self->grep_error_log($re);
        return $l[0] if @l;
        return undef if time > $deadline;
        sleep 0.02;
    }
}

sub _log_files {
    my ($self) = @_;
    my $dir = $self->{_testdir};
    my @f = ('error.log', 'stderr.log');
    opendir my $d, $dir or return @f;
    push @f, sort grep { /^(?:valgrind\.\d+\.log|(?:a|ub)san\.\d+)$/ }
        readdir $d;
    closedir $d;
    return @f;
}

# text appended to the log files since the previous check
sub _new_log_text {
    my ($self) = @_;
    my $text = '';
    for my $f ($self->_log_files) {
        my $c = $self->read_file($f) // next;
        my $off = $self->{_log_offsets}{$f} // 0;
        $off = 0 if $off > length $c;
        $text .= substr($c, $off);
        $text .= "\n" unless $text eq '' || $text =~ /\n$/;
        $self->{_log_offsets}{$f} = length $c;
    }
    $text .= join '', map { "$_\n" } @{$self->{_problems_extra}};
    $self->{_problems_extra} = [];
    return $text;
}

sub _test_ended {
    my $hub = eval { Test::More->builder->{Stack}->top };
    return 1 if $hub && $hub->can('plan') && ($hub->plan // '') eq 'SKIP';
    return 1 if $hub && $hub->can('ended') && $hub->ended;
    return 1 if Test::More->builder->{Done_Testing};
    return 0;
}

sub _check_logs_once {
    my ($self) = @_;
    my @bad = log_problems($self->_new_log_text, @{$self->{_allow}});
    my $first = !$self->{_check_done}++;
    my $name = 'no alerts in error.log';
    my $emit = $first ? 1 : scalar @bad;
    return unless $emit;

    my $tb = Test::More->builder;
    if (_test_ended() || (!$self->{_planned} && !$tb->has_plan && $first
                          && $self->{_in_end} && $tb->current_test == 0)) {
        # test already finished (done_testing) or nothing to attach to
        if (@bad) {
            print STDERR "# $name: FAILED\n", map { "#   $_\n" } @bad;
            $self->{_force_fail} = 1;
        }
        return;
    }

    Test::More::ok(!@bad, $name)
        or Test::More::diag(join "\n", "problems in logs of "
            . $self->{_testdir} . ':', @bad);
}

# done_testing style: stop nginx, check logs, finish
sub done_testing {
    my ($self, @args) = @_;
    $self->stop;
    Test::More::done_testing(@args);
}

###############################################################################
# waiting helpers

sub waitforsocket {
    my ($self, $addr, $timeout) = @_;
    if (!ref $self) { ($addr, $timeout) = ($self, $addr) }
    my $deadline = time + ($timeout // 5 * timeout_scale());
    while (1) {
        my $s = IO::Socket::INET->new(PeerAddr => $addr, Proto => 'tcp',
            Timeout => 1);
        if ($s) { close $s; return 1 }
        return 0 if time > $deadline;
        sleep 0.01;
    }
}

sub waitforfile {
    my ($self, $file, $timeout) = @_;
    if (!ref $self) { ($file, $timeout) = ($self, $file) }
    my $deadline = time + ($timeout // 5 * timeout_scale());
    while (1) {
        return 1 if -e $file;
        return 0 if time > $deadline;
        sleep 0.01;
    }
}

# wait_until(sub { ... }, $timeout): poll a predicate
sub wait_until {
    my ($self, $pred, $timeout) = @_;
    my $deadline = time + ($timeout // 5) * timeout_scale();
    while (1) {
        my $r = $pred->();
        return $r if $r;
        return undef if time > $deadline;
        sleep 0.02;
    }
}

###############################################################################
# HTTP helpers (exported)

sub http_get {
    my ($uri, %opts) = @_;
    my $host = $opts{host} // 'localhost';
    return http("GET $uri HTTP/1.0\r\nHost: $host\r\n\r\n", %opts);
}

sub http_post {
    my ($uri, $body, %headers) = @_;
    $body //= '';
    my %opts;
    for my $k (qw(PeerAddr timeout)) {
        $opts{$k} = delete $headers{$k} if exists $headers{$k};
    }
    $headers{Host} //= 'localhost';
    $headers{'Content-Length'} = length $body;
    my $h = join '', map { "$_: $headers{$_}\r\n" } sort keys %headers;
    return http("POST $uri HTTP/1.0\r\n$h\r\n$body", %opts);
}

# http($raw, PeerAddr => 'host:port', timeout => secs): raw response string
sub http {
    my ($request, %opts) = @_;
    my $addr = $opts{PeerAddr} // ('127.0.0.1:' . port(8080));
    my $timeout = ($opts{timeout} // 8) * timeout_scale();

    my $s = IO::Socket::INET->new(PeerAddr => $addr, Proto => 'tcp',
        Timeout => $timeout);
    unless ($s) {
        Test::More::diag("http: connect to $addr failed: $!");
        return undef;
    }
    $s->autoflush(1);
    binmode $s;
    vdiag("http request:\n$request");

    my $off = 0;
    while ($off < length $request) {
        my $n = syswrite($s, $request, length($request) - $off, $off);
        if (!defined $n) {
            next if $! == EINTR;
            last;
        }
        $off += $n;
    }

    my $reply = '';
    my $sel = IO::Select->new($s);
    my $deadline = time + $timeout;
    while (1) {
        my $left = $deadline - time;
        if ($left <= 0) {
            Test::More::diag("http: timeout reading from $addr");
            last;
        }
        next unless $sel->can_read($left);
        my $n = sysread($s, my $buf, 65536);
        if (!defined $n) { next if $! == EINTR; last }
        last if $n == 0;
        $reply .= $buf;
    }
    close $s;
    vdiag("http response:\n$reply");
    return $reply;
}

###############################################################################
# cleanup

sub _cleanup {
    my ($self) = @_;
    return if $self->{_owner_pid} != $$;    # forked child of a test
    return if $self->{_cleaned}++;
    $self->stop;
    my $log = $self->read_file('error.log') // '';
    if ($ENV{TEST_NGINX_LEAVE} || $log =~ /exited on signal (?:6|7|8|11)\b/) {
        # a crashed worker: its logs are the only trace (workers are not
        # dumpable, so there is no core)
        print STDERR "# test directory left: $self->{_testdir}\n";
    } else {
        rmtree($self->{_testdir});
    }
}

sub DESTROY {
    my ($self) = @_;
    local ($?, $@, $!);
    return if ${^GLOBAL_PHASE} eq 'DESTRUCT' && $self->{_cleaned};
    $self->_cleanup;
    $FORCE_FAIL = 1 if $self->{_force_fail};
}

# Test2 computes the exit code after our END block ran: force failure there
# when a log problem could not be reported as a test (after done_testing)
eval {
    require Test2::API;
    Test2::API::test2_add_callback_exit(sub {
        my ($ctx, $real, $new) = @_;
        $$new ||= 1 if $FORCE_FAIL;
    });
};

END {
    my $exit = $?;
    my $force = 0;
    for my $t (grep { defined } @INSTANCES) {
        $t->{_in_end} = 1;
        eval { $t->_cleanup; 1 } or print STDERR "# cleanup failed: $@";
        $force ||= $t->{_force_fail};
    }
    $FORCE_FAIL = 1 if $force;
    $? = $exit;
    $? = 1 if $force && !$exit;
}

1;
