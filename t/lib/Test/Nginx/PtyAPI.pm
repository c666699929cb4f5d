package Test::Nginx::PtyAPI;

# Test::Nginx::PtyAPI - HTTP JSON agent API client for ngx_pty_module tests.
#
#   use Test::Nginx::PtyAPI qw(api_call api_get);
#   my ($status, $json, $body, $headers) =
#       api_call(port(8080), '/agents/x/sessions', { command => ['/bin/sh'] });
#   my ($st, $j) = api_get(port(8080), '/agents/x/sessions/y');
#
# api_call($port, $path, $hashref_or_raw_string, %opts)
#   POSTs JSON (Content-Type: application/json, Connection: close).
#   A hashref/arrayref is JSON-encoded, a plain string is sent as-is (for
#   malformed-body tests), undef sends an empty body.
#   %opts: method => 'POST', http => '1.1' | '1.0', headers => {..}
#          (undef value removes a default header), timeout => 35,
#          host => '127.0.0.1', content_type => ...
#   Returns ($status, $decoded_json_or_undef, $raw_body, \%headers) with
#   lowercase header names; $status is undef when no response arrived.
#   Chunked responses are de-chunked.

use strict;
use warnings;

use Exporter qw(import);
use Errno qw(EINTR EAGAIN EWOULDBLOCK);
use IO::Select;
use IO::Socket::INET;
use Time::HiRes qw(time);
use Test::More ();

use Test::Nginx ();
use Test::Nginx::PtyWS qw(json_encode json_decode);

our @EXPORT = qw(api_call api_get);
our @EXPORT_OK = qw(api_call api_get api_request parse_response);

sub api_call {
    my ($port, $path, $body, %opts) = @_;
    return api_request($port, $opts{method} // 'POST', $path, $body, %opts);
}

sub api_get {
    my ($port, $path, %opts) = @_;
    return api_request($port, $opts{method} // 'GET', $path, undef,
        no_body => 1, %opts);
}

sub api_request {
    my ($port, $method, $path, $body, %opts) = @_;
    my $host = $opts{host} // '127.0.0.1';
    my $timeout = ($opts{timeout} // 35) * Test::Nginx::timeout_scale();
    my $ver = $opts{http} // '1.1';

    $body = json_encode($body) if ref $body;
    $body //= '';

    my @h = (
        [Host => "$host:$port"],
        [Connection => 'close'],
    );
    unless ($opts{no_body} && $body eq '') {
        push @h, ['Content-Type' => $opts{content_type} // 'application/json'];
        push @h, ['Content-Length' => length $body];
    }
    my $extra = $opts{headers} // {};
    for my $n (sort keys %$extra) {
        @h = grep { lc $_->[0] ne lc $n } @h;
        push @h, [$n => $extra->{$n}] if defined $extra->{$n};
    }

    my $req = "$method $path HTTP/$ver\r\n"
        . join('', map { "$_->[0]: $_->[1]\r\n" } @h) . "\r\n" . $body;

    my $raw = _exchange($host, $port, $req, $timeout);
    return (undef, undef, undef, {}) unless defined $raw && length $raw;
    my ($status, $headers, $rbody) = parse_response($raw);
    my $json;
    if (defined $rbody && length $rbody) {
        $json = eval { json_decode($rbody) };
    }
    return ($status, $json, $rbody, $headers);
}

sub _exchange {
    my ($host, $port, $req, $timeout) = @_;
    local $SIG{PIPE} = 'IGNORE';
    my $s = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port,
        Proto => 'tcp', Timeout => $timeout);
    unless ($s) {
        Test::More::diag("api: connect to $host:$port failed: $!");
        return undef;
    }
    binmode $s;
    $s->autoflush(1);

    my $off = 0;
    while ($off < length $req) {
        my $n = syswrite($s, $req, length($req) - $off, $off);
        if (!defined $n) { next if $! == EINTR; last }
        $off += $n;
    }

    my $sel = IO::Select->new($s);
    my $deadline = time + $timeout;
    my $raw = '';
    while (1) {
        my $left = $deadline - time;
        if ($left <= 0) {
            Test::More::diag("api: timeout after ${timeout}s reading response");
            last;
        }
        next unless $sel->can_read($left);
        my $n = sysread($s, my $buf, 65536);
        if (!defined $n) {
            next if $! == EINTR || $! == EAGAIN || $! == EWOULDBLOCK;
            last;
        }
        last if $n == 0;
        $raw .= $buf;
    }
    close $s;
    return $raw;
}

# parse_response($raw) -> ($status, \%headers, $body)
sub parse_response {
    my ($raw) = @_;
    my $i = index($raw, "\r\n\r\n");
    my ($head, $body) = $i < 0 ? ($raw, '') : (substr($raw, 0, $i), substr($raw, $i + 4));
    my ($sl, @lines) = split /\r\n/, $head;
    my ($status) = ($sl // '') =~ m{^HTTP/\d\.\d\s+(\d{3})};
    my %h;
    for (@lines) {
        my ($n, $v) = /^([^:]+):\s*(.*?)\s*$/ or next;
        $n = lc $n;
        $h{$n} = exists $h{$n} ? "$h{$n}, $v" : $v;
    }
    if (($h{'transfer-encoding'} // '') =~ /chunked/i) {
        $body = _dechunk($body);
    } elsif (defined $h{'content-length'} && $h{'content-length'} =~ /^\d+$/) {
        $body = substr($body, 0, $h{'content-length'});
    }
    return ($status, \%h, $body);
}

sub _dechunk {
    my ($in) = @_;
    my $out = '';
    while ($in =~ s/^([0-9a-fA-F]+)[^\r\n]*\r\n//) {
        my $len = hex $1;
        last if $len == 0;
        $out .= substr($in, 0, $len, '');
        $in =~ s/^\r\n//;
    }
    return $out;
}

1;
