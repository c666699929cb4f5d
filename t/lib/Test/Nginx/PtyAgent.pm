package Test::Nginx::PtyAgent;

# Test::Nginx::PtyAgent - the agent API calls as one-liners for tests.
#
#   my $r = agent($t, 'write', { id => 'pty-1', input => 'ls', submit => 1 });
#   $r->{_status}                      # HTTP status; the rest is the JSON
#   my $text = agent_collect($t, 'pty-1', qr/done/, 10);   # polls write
#
# Booleans: pass 1/0 for submit and they are sent as JSON true/false.

use strict;
use warnings;

use Exporter qw(import);
use Time::HiRes qw(time);

use Test::Nginx::PtyAPI qw(api_call);

our @EXPORT = qw(agent agent_collect agent_start);

my %BOOL = map { $_ => 1 } qw(submit highlights running full);

sub agent {
    my ($t, $call, $body, %opts) = @_;
    my %b = %{ $body // {} };
    for (keys %b) {
        $b{$_} = $b{$_} ? \1 : \0 if $BOOL{$_} && !ref $b{$_};
    }
    my $path = ($opts{location} // '/pty/') . $call;
    my ($status, $json, $raw) = api_call($t->port(8080), $path, \%b, %opts);
    $json = { _raw => $raw } unless ref $json eq 'HASH';
    $json->{_status} = $status // 0;
    return $json;
}

# start, dying unless 200
sub agent_start {
    my ($t, $command, %args) = @_;
    my $loc = delete $args{location};
    my $r = agent($t, 'start', { command => $command, %args },
        $loc ? (location => $loc) : ());
    die "start \"$command\" failed: $r->{_status} "
        . ($r->{error}{message} // $r->{_raw} // '') . "\n"
        unless $r->{_status} == 200;
    return $r;
}

# polls write (empty input) until the collected output matches $re or the
# session ends; returns the text collected
sub agent_collect {
    my ($t, $id, $re, $timeout, %opts) = @_;
    my $deadline = time + ($timeout // 10);
    my $out = $opts{initial} // '';
    while (time < $deadline) {
        my $r = agent($t, 'write', { id => $id, wait_ms => 200 }, %opts);
        last unless $r->{_status} == 200;
        $out .= $r->{output};
        last if $out =~ $re || !$r->{running} && !$r->{more};
    }
    return $out;
}

1;
