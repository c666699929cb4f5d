#!/usr/bin/perl

# Memory of idle sessions, and many of them: starts IDLE_SESSIONS (10000)
# sessions of bash at its prompt, 120x30, through the agent API on two
# workers; measures what each costs (the zone, from the API's status call;
# the workers' anonymous memory and the keepers' Pss, from /proc); checks
# that every session answers a command; kills them all and checks that the
# zone is empty again.  Prints table rows like t/bench/run.pl.
#
#   IDLE_SESSIONS  sessions (10000)
#   IDLE_CLIENTS   API clients starting, writing and killing at once (8)
#   IDLE_CHECK     sessions that must answer a command (all)
#   IDLE_RUNS      rounds of start / measure / kill (3; the figures are
#                  min/median/max over them)
#
# 10,000 sessions are 20,000 processes (a keeper and bash each), as many
# PTYs and 20,000 descriptors in the workers: the kernel's PTY limit
# (kernel.pty.max) is raised for the run when it is too low and we may.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../lib";
use lib $FindBin::Bin;
use BenchStats qw(median);

use POSIX qw(:sys_wait_h);
use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);
use Time::HiRes qw(time sleep);

my $n = $ENV{IDLE_SESSIONS} // 10000;
my $clients = $ENV{IDLE_CLIENTS} // 8;
my $check = $ENV{IDLE_CHECK} // $n;
my $runs = $ENV{IDLE_RUNS} // 3;
my $target = 128 * 1024;

$clients = $n if $clients > $n;
$check = $n if $check > $n;

my $restore_pty = raise_limits($n);

# room for every session with its prompt, and headroom to grow
my $zone_mib = 16 + int($n * 32 / 1024);
my $conns = 2 * $n + 1024;

my $t = pty_nginx(workers => 2, reuseport => 1, zone => "${zone_mib}m",
    extra_loc => 'pty_closed_linger 200ms;');
# no more files than the hard limit: the workers cannot raise it
my $hard = `sh -c 'ulimit -Hn'`;
chomp $hard;
my $nofile = $conns + 1024;
$nofile = $hard if $hard =~ /^\d+$/ && $hard < $nofile;
diag("the hard limit of open files ($hard) is low for $n sessions")
    if $nofile < $n + 1024;
my $events = "worker_rlimit_nofile $nofile;\n\n"
    . "events {\n    worker_connections $conns;\n}";
$t->{_templates}{'nginx.conf'} =~ s/^events \{\}/$events/m
    or die "no events block in the config\n";
$t->run();

my $port = $t->port(8080);
my @workers = $t->worker_pids;
my (%fig, @notes);

for my $run (1 .. $runs) {
    my $zone0 = status()->{zone}{used};
    my %anon0 = map { $_ => proc_kib($_, 'status', 'RssAnon') } @workers;

    # start
    my $t0 = time;
    my @ids = in_parallel(sub {
        my ($i) = @_;
        my ($st, $r) = api_call($port, '/pty/start', { command => 'exec bash',
            cols => 120, rows => 30, wait_ms => 0 }, timeout => 120);
        return $st && $st == 200 ? $r->{id} : "error " . ($st // 'none');
    });
    my $start_s = time - $t0;
    my @bad = grep { /^error/ } @ids;
    @ids = grep { !/^error/ } @ids;
    ok(!@bad, "$n sessions started in " . sprintf('%.1f', $start_s) . 's')
        or diag("failed starts: " . scalar(@bad) . " (first: $bad[0])");
    push @{$fig{starts}}, @ids / $start_s;
    push @{$fig{start_s}}, $start_s;

    # idle: every prompt printed, the zone and the workers settled
    my $idle = wait_idle();
    ok($idle->{sessions}{running} == @ids,
        "$idle->{sessions}{running} sessions running at their prompt");

    my $per = @ids || 1;
    push @{$fig{zone}}, ($idle->{zone}{used} - $zone0) / $per;
    push @{$fig{retained}}, ($idle->{buffers}{ring_used}
        + $idle->{buffers}{scrollback_used}) / $per;
    push @{$fig{buffers}}, ($idle->{buffers}{ring}
        + $idle->{buffers}{scrollback} + $idle->{buffers}{inbox}) / $per;

    my ($anon, $screens) = (0, 0);
    for my $w (@workers) {
        $anon += (proc_kib($w, 'status', 'RssAnon') - $anon0{$w}) * 1024;
    }
    push @{$fig{worker}}, $anon / $per;
    push @{$fig{screen}}, screen_bytes() / $per;

    my %k = keepers(\@workers);
    push @{$fig{keeper_pss}}, $k{pss} / ($k{n} || 1);
    push @{$fig{keeper_pte}}, $k{pte} / ($k{n} || 1);
    push @{$fig{program_pss}}, $k{child_pss} / ($k{n} || 1);
    is($k{n}, scalar @ids, "a keeper for every session ($k{n})");

    # usable: a command in each, its answer through the API
    my @sample = @ids[0 .. $check - 1];
    $t0 = time;
    my @ok = in_parallel(sub {
        my ($i) = @_;
        my ($st, $r) = api_call($port, '/pty/write', { id => $sample[$i],
            input => "printf 'ok-%s\\n' $i", submit => \1,
            wait_for => "ok-$i", wait_ms => 20000 }, timeout => 60);
        return $st && $st == 200 && $r->{matched} ? 1 : 0;
    }, scalar @sample);
    my $usable = grep { $_ } @ok;
    my $write_s = time - $t0;
    is($usable, scalar @sample, "$usable of " . @sample . " sessions "
        . "answered a command (" . sprintf('%.1f', $write_s) . 's)');
    push @{$fig{usable}}, $usable / (@sample || 1);
    push @{$fig{writes}}, @sample / $write_s;

    # kill them all; the zone must be as it was
    $t0 = time;
    my @killed = in_parallel(sub {
        my ($i) = @_;
        my ($st) = api_call($port, '/pty/kill', { id => $ids[$i] },
            timeout => 60);
        return $st && $st == 200 ? 1 : 0;
    }, scalar @ids);
    push @{$fig{kill_s}}, time - $t0;
    is(scalar(grep { $_ } @killed), scalar @ids, 'every session killed');

    my $end = wait_until(sub {
        my $s = status();
        return $s->{sessions}{total} == 0 && $s->{zone}{used} <= $zone0
            ? $s : undef;
    }, 60);
    ok($end, 'the zone is empty again') or diag(explain(status()));
    ok(!keepers_left(\@workers), 'no keeper left');
}

is_deeply([sort $t->worker_pids], [sort @workers], 'no worker died');

$t->stop();
restore_limits($restore_pty);
done_testing();

print "\n";
printf "%-34s %-26s %-9s %s\n", 'figure', 'measured', 'target', 'result';
row('zone KiB/session (idle)', $fig{zone}, 1 / 1024, '%.1f');
row('  of which buffers KiB', $fig{buffers}, 1 / 1024, '%.1f');
row('  output retained KiB', $fig{retained}, 1 / 1024, '%.2f');
row('worker KiB/session (RssAnon)', $fig{worker}, 1 / 1024, '%.1f');
row('  of which screen model KiB', $fig{screen}, 1 / 1024, '%.1f');
my @module = map { $fig{zone}[$_] - $fig{retained}[$_] + $fig{worker}[$_] }
    0 .. $#{$fig{zone}};
row('module KiB/session (zone+worker)', \@module, 1 / 1024, '%.1f',
    '<=128', median(@module) <= $target);
# the screen grids are allocated whole but touched row by row: were
# every row written, the worker would hold them all
my @worst = map { $module[$_] + $fig{screen}[$_] } 0 .. $#module;
row('  same, every screen row written', \@worst, 1 / 1024, '%.1f', '<=128',
    median(@worst) <= $target);
row('keeper Pss KiB/session', $fig{keeper_pss}, 1 / 1024, '%.1f');
row('keeper page tables KiB/session', $fig{keeper_pte}, 1 / 1024, '%.1f');
row('bash Pss KiB/session', $fig{program_pss}, 1 / 1024, '%.1f');
row("time to start $n (s)", $fig{start_s}, 1, '%.1f');
row('starts/s', $fig{starts}, 1, '%.0f');
row('usable (answered a command)', $fig{usable}, 100, '%.1f%%', '100%',
    median(@{$fig{usable}}) == 1);
row("time to kill $n (s)", $fig{kill_s}, 1, '%.1f');
printf "\n(min/median/max over %d run%s; %d idle bash sessions, 120x30, "
    . "2 workers, %d API clients)\n", $runs, $runs == 1 ? '' : 's', $n,
    $clients;

sub row {
    my ($name, $v, $scale, $fmt, $tgt, $pass) = @_;
    my @s = sort { $a <=> $b } map { $_ * $scale } @$v;
    printf "%-34s %-26s %-9s %s\n", $name,
        sprintf("$fmt/$fmt/$fmt", $s[0], median(@s), $s[-1]),
        $tgt // '', defined $tgt ? ($pass ? 'pass' : 'FAIL') : '';
}


sub status {
    my ($st, $r) = api_call($port, '/pty/status', {});
    die "status: " . ($st // 'no answer') . "\n" unless $st && $st == 200;
    return $r;
}

# the screen models of both workers: ask until each has answered
sub screen_bytes {
    my (%by, $tries);
    while (keys %by < @workers && $tries++ < 200) {
        my $s = status();
        $by{$s->{worker}{pid}} = $s->{worker}{screen_bytes};
    }
    my $sum = 0;
    $sum += $_ for values %by;
    return $sum;
}

# runs $code->($i) for $i in 0 .. $count - 1 over $clients processes;
# returns the results in order (one line each)
sub in_parallel {
    my ($code, $count) = @_;
    $count //= $n;
    my $dir = $t->testdir;
    my @pids;
    for my $c (0 .. $clients - 1) {
        my $pid = fork() // die "fork: $!\n";
        if ($pid == 0) {
            open my $fh, '>', "$dir/part.$c" or POSIX::_exit(1);
            for (my $i = $c; $i < $count; $i += $clients) {
                print $fh "$i ", $code->($i), "\n";
            }
            close $fh;
            POSIX::_exit(0);
        }
        push @pids, $pid;
    }
    waitpid($_, 0) for @pids;
    my @out;
    for my $c (0 .. $clients - 1) {
        open my $fh, '<', "$dir/part.$c" or next;
        while (<$fh>) {
            chomp;
            my ($i, $v) = split / /, $_, 2;
            $out[$i] = $v;
        }
        unlink "$dir/part.$c";
    }
    return map { $_ // 'error lost' } @out[0 .. $count - 1];
}

# the zone's use and the workers' memory stop moving once every prompt is
# out and nothing runs
sub wait_idle {
    my ($last, $same) = ('', 0);
    my $s;
    wait_until(sub {
        $s = status();
        my $key = join ',', $s->{zone}{used}, $s->{buffers}{scrollback_used},
            $s->{buffers}{ring_used},
            map { proc_kib($_, 'status', 'RssAnon') } @workers;
        $same = $key eq $last ? $same + 1 : 0;
        $last = $key;
        return $same >= 4;
    }, 120, 0.5);
    return $s;
}

sub wait_until {
    my ($cond, $timeout, $step) = @_;
    my $deadline = time + $timeout;
    while (time < $deadline) {
        my $r = $cond->();
        return $r if $r;
        sleep($step // 0.1);
    }
    return undef;
}

sub proc_kib {
    my ($pid, $file, $key) = @_;
    open my $fh, '<', "/proc/$pid/$file" or return 0;
    while (my $line = <$fh>) {
        return $1 if $line =~ /^\Q$key\E:\s+(\d+)/;
    }
    return 0;
}

sub ppid_of {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/stat" or return 0;
    my $stat = <$fh> // '';
    return $stat =~ /\)\s+\S+\s+(\d+)/ ? $1 : 0;
}

# the keepers (children of the workers' keeper forkers, or of the workers)
# and the programs they run
sub keepers {
    my ($workers) = @_;
    my %w = map { $_ => 1 } @$workers;
    my (%parent, %k, %r);
    for my $dir (glob '/proc/[0-9]*') {
        my ($pid) = $dir =~ m{(\d+)$};
        $parent{$pid} = ppid_of($pid);
    }
    my %forker = map { $_ => 1 } grep { $w{$parent{$_}} } keys %parent;
    for my $pid (keys %parent) {
        $k{$pid} = 1 if ($w{$parent{$pid}} || $forker{$parent{$pid}})
            && cmdline($pid) =~ /pty session keeper/;
    }
    for my $pid (keys %parent) {
        $r{child_pss} += proc_kib($pid, 'smaps_rollup', 'Pss') * 1024
            if $k{$parent{$pid}};
    }
    for my $pid (keys %k) {
        $r{pss} += proc_kib($pid, 'smaps_rollup', 'Pss') * 1024;
        $r{pte} += proc_kib($pid, 'status', 'VmPTE') * 1024;
    }
    $r{n} = keys %k;
    $r{$_} //= 0 for qw/pss pte child_pss/;
    return %r;
}

sub cmdline {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/cmdline" or return '';
    my $line = <$fh> // '';
    $line =~ tr/\0/ /;
    return $line;
}

sub keepers_left {
    my ($workers) = @_;
    return wait_until(sub { my %k = keepers($workers); $k{n} == 0 }, 30)
        ? 0 : 1;
}

# kernel.pty.max must allow a PTY per session (and the machine's others)
sub raise_limits {
    my ($want) = @_;
    my $f = '/proc/sys/kernel/pty/max';
    open my $fh, '<', $f or return undef;
    my $max = <$fh>;
    chomp $max;
    close $fh;
    my $need = $want + 1024;
    return undef if $max >= $need;
    if (open my $w, '>', $f) {
        print $w $need;
        close $w and return $max;
    }
    diag("kernel.pty.max is $max, fewer than $need PTYs: "
        . "some starts will fail");
    return undef;
}

sub restore_limits {
    my ($old) = @_;
    return unless defined $old;
    open my $w, '>', '/proc/sys/kernel/pty/max' or return;
    print $w $old;
    close $w;
}
