package Test::Nginx::PtyAuth;

# Test::Nginx::PtyAuth - a real auth service for auth_request tests.
#
#   my $pid = auth_server($t, 8081);         # forks it; stops with the test
#   my $tok = token('alice', 'pty:observe pty:control', 3600);
#   my $old = token('alice', 'pty:observe', -10);           # expired
#   my %h = bearer($tok);                   # Authorization header
#   my @p = subprotocols($tok);             # ['pty-ws.v1', 'bearer.<b64>']
#   AUTH_LOCATION                           # the auth_request recipe
#
# The service answers GET /check: 200 with X-Principal and X-Scopes for a
# token it signed that has not expired, 401 otherwise.  It is strict, as
# some are: a request that looks like a WebSocket upgrade (Upgrade,
# Sec-WebSocket-Key) gets 400, which is what a leaked server-level
# proxy_set_header does to an auth subrequest.  Every request's header
# names are appended to auth-requests.log in the test directory.
#
# Tokens: base64url(principal).base64url(scopes).expiry.hmac_sha256_hex

use strict;
use warnings;

use Exporter qw(import);
use Digest::SHA qw(hmac_sha256_hex);
use IO::Socket::INET;
use MIME::Base64 qw(encode_base64url decode_base64url);
use POSIX ();

our @EXPORT = qw(auth_server token bearer subprotocols AUTH_LOCATION
    REFUSE_LOCATIONS AUTH_ATTACH);

my $SECRET = 'test-secret-' . $$;
my $PARENT = $$;
my @SERVERS;

# the documented recipe (docs/SECURITY.md): the subrequest carries the
# token as Authorization and none of the upgrade's headers
use constant AUTH_LOCATION => <<'CONF';
        location = /_auth {
            internal;
            proxy_pass http://127.0.0.1:%%PORT_8081%%/check;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header Authorization "Bearer $pty_bearer_token";
            proxy_set_header Upgrade "";
            proxy_set_header Connection "";
            proxy_set_header Sec-WebSocket-Key "";
            proxy_set_header Sec-WebSocket-Version "";
            proxy_set_header Sec-WebSocket-Protocol "";
            proxy_set_header Sec-WebSocket-Extensions "";
        }
CONF

use constant REFUSE_LOCATIONS => <<'CONF';
        location @pty_401 { pty_refuse unauthenticated; }
        location @pty_403 { pty_refuse permission_denied; }
        location @pty_429 { pty_refuse rate_limited; }
CONF

# what an attach or API location adds
use constant AUTH_ATTACH => <<'CONF';
            auth_request /_auth;
            auth_request_set $pty_who $upstream_http_x_principal;
            auth_request_set $pty_what $upstream_http_x_scopes;
            pty_principal $pty_who;
            pty_scopes $pty_what;
            error_page 401 = @pty_401;
            error_page 403 = @pty_403;
CONF

sub token {
    my ($principal, $scopes, $ttl) = @_;
    my $body = encode_base64url($principal) . '.'
        . encode_base64url($scopes) . '.' . int(time + $ttl);
    return "$body." . hmac_sha256_hex($body, $SECRET);
}

sub bearer {
    return (Authorization => "Bearer $_[0]");
}

sub subprotocols {
    return ['pty-ws.v1', 'bearer.' . encode_base64url($_[0])];
}

sub _check {
    my ($auth) = @_;
    my ($tok) = ($auth // '') =~ /^Bearer\s+(\S+)$/ or return;
    my ($p, $s, $exp, $mac) = split /\./, $tok;
    return unless defined $mac;
    return unless hmac_sha256_hex("$p.$s.$exp", $SECRET) eq $mac;
    return unless $exp =~ /^\d+$/ && $exp > time;
    return (decode_base64url($p), decode_base64url($s));
}

sub _answer {
    my ($c, $status, @h) = @_;
    my %text = (200 => 'OK', 400 => 'Bad Request', 401 => 'Unauthorized');
    print $c "HTTP/1.1 $status $text{$status}\r\n",
        map({ "$_\r\n" } @h), "Content-Length: 0\r\nConnection: close\r\n\r\n";
}

sub _serve {
    my ($srv, $log) = @_;
    while (my $c = $srv->accept) {
        my (%h, @names);
        local $/ = "\r\n";
        my $line = <$c>;
        while (defined(my $l = <$c>)) {
            last if $l eq "\r\n";
            my ($n, $v) = $l =~ /^([^:]+):\s*(.*?)\r\n$/ or next;
            $h{lc $n} = $v;
            push @names, lc $n;
        }
        if (open my $fh, '>>', $log) {
            print $fh join(' ', sort @names), "\n";
            close $fh;
        }
        if (defined $h{upgrade} || defined $h{'sec-websocket-key'}) {
            _answer($c, 400);
        } elsif (my ($p, $s) = _check($h{authorization})) {
            _answer($c, 200, "X-Principal: $p", "X-Scopes: $s");
        } else {
            _answer($c, 401, 'WWW-Authenticate: Bearer');
        }
        close $c;
    }
}

sub auth_server {
    my ($t, $num) = @_;
    my $port = $t->port($num);
    my $srv = IO::Socket::INET->new(LocalAddr => '127.0.0.1',
        LocalPort => $port, Listen => 64, ReuseAddr => 1, Proto => 'tcp')
        or die "auth server: cannot listen on $port: $!\n";
    my $pid = fork // die "fork: $!\n";
    if ($pid == 0) {
        # the harness's handlers and END blocks are the test's, not ours
        $SIG{$_} = 'DEFAULT' for qw/TERM INT HUP/;
        _serve($srv, $t->testdir . '/auth-requests.log');
        POSIX::_exit(0);
    }
    close $srv;
    push @SERVERS, $pid;
    return $pid;
}

END {
    return unless $$ == $PARENT;
    local $?;       # the test's exit status, not the server's
    kill 'TERM', @SERVERS if @SERVERS;
    waitpid $_, 0 for @SERVERS;
}

1;
