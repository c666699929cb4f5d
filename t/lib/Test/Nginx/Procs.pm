package Test::Nginx::Procs;

# Test::Nginx::Procs - the processes of the module (keeper forkers, spare
# keepers, keepers, programs) as the tests see them, from /proc.
#
#   use Test::Nginx::Procs qw(alive stat_of all_pids children titled
#                             wait_spare);
#   my ($forker) = titled('pty keeper forker', children($worker));
#   my $spare = wait_spare($t, $forker);
#
# alive($pid)          running (not a zombie)
# stat_of($pid)        { comm, state, ppid } or undef
# all_pids()           every pid on the host
# children($ppid)      the pids whose parent is $ppid
# titled($title, @p)   those of @p whose command line holds $title
# wait_spare($t, $f, $not)
#                      the spare keeper forker $f holds, once it is there
#                      (and is not $not); undef after 5 s

use strict;
use warnings;

use Exporter qw(import);

use Test::Nginx ();

our @EXPORT_OK = qw(alive stat_of all_pids children titled wait_spare
    wait_forker);

sub alive {
    my ($pid) = @_;
    my $s = stat_of($pid);
    return $s && $s->{state} ne 'Z';
}

sub stat_of { Test::Nginx::_proc_stat($_[0]) }

sub all_pids { map { m{/(\d+)$} } glob '/proc/[0-9]*' }

sub children {
    my ($ppid) = @_;
    return grep { ((stat_of($_) // {})->{ppid} // 0) == $ppid } all_pids();
}

sub titled {
    my ($title, @pids) = @_;
    return grep { index(Test::Nginx::_cmdline($_), $title) >= 0 } @pids;
}

# the worker's keeper forker: forked as the worker starts, titled after
sub wait_forker {
    my ($t, $worker, $secs) = @_;
    my ($f) = $t->wait_until(sub {
        (titled('pty keeper forker', children($worker)))[0] }, $secs // 10);
    return $f;
}

sub wait_spare {
    my ($t, $f, $not) = @_;
    my ($s) = $t->wait_until(sub {
        my @s = grep { !defined $not || $_ != $not }
            titled('pty spare keeper', children($f));
        $s[0];
    }, 5);
    return $s;
}

1;
