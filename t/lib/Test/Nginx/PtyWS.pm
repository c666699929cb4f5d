package Test::Nginx::PtyWS;

# Test::Nginx::PtyWS - raw WebSocket client for pty-ws/v1 tests.
#
#   use Test::Nginx::PtyWS qw(uuid_v7 rfc3339_now);
#   my $ws = Test::Nginx::PtyWS->connect(port => port(8080),
#       path => "/agents/$inst/sessions/$sess/attach");
#   is($ws->status, 101);
#   my $hello = $ws->recv_json(5);             # validated against schemas
#   my $id = $ws->send_op('pty.join_session', { role => 'controller' });
#   my @msgs = $ws->recv_until(sub { $_[0]{op} eq 'pty.session_frame' }, 5);
#   $ws->close(1000, 'bye'); my ($code) = $ws->wait_close(5);
#
# Written directly on IO::Socket::INET so that tests can also send broken
# traffic (unmasked / fragmented / oversized frames, bad handshakes).
#
# Every received text message is decoded and validated against
#   <repo>/../shared/spec/schemas/pty-ws-v1.frames.schema.json       (envelope)
#   <repo>/../shared/spec/schemas/pty-extensions-v1.frames.schema.json
#     (payload registry: for op listed in its "properties", e.g.
#      pty.session_frame -> #/$defs/SessionFramePayload)
# or $ENV{PTY_SPEC_SCHEMAS}.  An invalid frame records a failing test
# ("server frame matches pty-ws/v1 schema") with the validator's errors;
# nothing dies.  The schemas declare draft 2020-12; they are loaded with
# JSON::Validator::Schema::Draft201909 (same keywords for what they use).

use strict;
use warnings;

use Exporter qw(import);
use Digest::SHA qw(sha1);
use MIME::Base64 qw(encode_base64 decode_base64);
use Errno qw(EINTR EAGAIN EWOULDBLOCK);
use IO::Select;
use IO::Socket::INET;
use Socket ();
use Time::HiRes qw(time);
use File::Spec;
use Test::More ();

use Test::Nginx ();

our @EXPORT_OK = qw(uuid_v7 rfc3339_now rfc3339 validate_frame
    session_frame_kind decode_output handshake schemas_dir json_encode
    json_decode);

use constant {
    OP_CONT  => 0x0,
    OP_TEXT  => 0x1,
    OP_BIN   => 0x2,
    OP_CLOSE => 0x8,
    OP_PING  => 0x9,
    OP_PONG  => 0xA,
};

my $WS_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
our $UUID_RE = qr/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-7[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$/;

my $JSON;
sub _json {
    return $JSON if $JSON;
    # the tests' JSON::PP::true, also where no schema validator loads it
    require JSON::PP;
    if (eval { require JSON::XS; 1 }) {
        $JSON = JSON::XS->new->utf8->canonical->allow_nonref;
    } else {
        require JSON::PP;
        $JSON = JSON::PP->new->utf8->canonical->allow_nonref;
    }
    return $JSON;
}
sub json_encode { return _json()->encode($_[0]) }
sub json_decode { return _json()->decode($_[0]) }

###############################################################################
# UUIDv7 / timestamps

my ($last_ms, $seq) = (0, 0);

sub uuid_v7 {
    my $ms = int(time * 1000);
    if ($ms <= $last_ms) { $ms = $last_ms; $seq++ } else { $seq = int(rand(0x400)) }
    if ($seq > 0xfff) { $ms++; $seq = 0 }
    $last_ms = $ms;

    my $hi = int($ms / 2**16);          # upper 32 bits of 48
    my $lo = $ms % 2**16;
    return sprintf('%08x-%04x-%04x-%04x-%04x%08x',
        $hi, $lo, 0x7000 | $seq,
        0x8000 | int(rand(0x4000)),
        int(rand(0x10000)), int(rand(2**32)));
}

sub rfc3339 {
    my ($t) = @_;
    my @g = gmtime(int $t);
    my $ms = int(($t - int $t) * 1000);
    return sprintf('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ',
        $g[5] + 1900, $g[4] + 1, $g[3], $g[2], $g[1], $g[0], $ms);
}

sub rfc3339_now { return rfc3339(time) }

###############################################################################
# schema validation

my ($ENVELOPE, $REGISTRY, $SCHEMA_STATE);

sub schemas_dir {
    return $ENV{PTY_SPEC_SCHEMAS} if $ENV{PTY_SPEC_SCHEMAS};
    return File::Spec->catdir($Test::Nginx::REPO_ROOT, '..', 'shared', 'spec',
        'schemas');
}

sub _load_schema {
    my ($file) = @_;
    open my $fh, '<', $file or die "can't open $file: $!\n";
    local $/;
    my $data = json_decode(<$fh>);
    close $fh;
    # draft 2020-12 is not known to JSON::Validator 5.14; drop $schema so no
    # meta-schema is fetched, and validate with the 2019-09 implementation
    delete $data->{'$schema'};
    require JSON::Validator::Schema::Draft201909;
    my $s = JSON::Validator::Schema::Draft201909->new($data);
    # its recursion cache keys on "$schema:$data" addresses, and temporary
    # schema hashes get reused addresses -> random false passes; our frames
    # are never self-referential, so turn it off
    $s->recursive_data_protection(0);
    $s->resolve;
    return $s;
}

# returns 1 when schemas are available, 0 when validation is skipped
sub _schemas {
    return $SCHEMA_STATE if defined $SCHEMA_STATE;
    my $dir = schemas_dir();
    my $env = File::Spec->catfile($dir, 'pty-ws-v1.frames.schema.json');
    my $ext = File::Spec->catfile($dir, 'pty-extensions-v1.frames.schema.json');
    if (!-e $env || !-e $ext) {
        Test::More::diag("NOTE: schemas not found in $dir, "
            . "frame validation disabled (set PTY_SPEC_SCHEMAS)");
        return $SCHEMA_STATE = 0;
    }
    $ENVELOPE = _load_schema($env);
    $REGISTRY = _load_schema($ext);
    return $SCHEMA_STATE = 1;
}

# validate_frame($hashref_or_json_string): list of error strings
sub validate_frame {
    my ($frame) = @_;
    return () unless _schemas();

    # validate a fresh copy (validator relies on Perl scalar flags)
    my $data = ref $frame ? json_decode(json_encode($frame)) : $frame;
    if (!ref $data) {
        my $d = eval { json_decode($data) };
        return ("not valid JSON: $@") unless defined $d;
        $data = $d;
    }
    return ('frame is not a JSON object') unless ref $data eq 'HASH';

    my @err = map { "envelope: $_" } $ENVELOPE->validate($data);

    my $op = $data->{op};
    if (defined $op && !ref $op
        && exists $REGISTRY->data->{properties}{$op})
    {
        for my $e ($REGISTRY->validate({ $op => $data->{payload} })) {
            (my $s = "$e") =~ s{^/\Q$op\E}{/payload};
            push @err, "payload($op): $s";
        }
    }
    return @err;
}

###############################################################################
# handshake

# record a failing test, reported at the caller's line in the .t file
sub _fail {
    my ($name, $diag) = @_;
    my $level = 0;
    while (my @c = caller($level)) {
        last unless $c[0] =~ /^Test::Nginx/;
        $level++;
    }
    local $Test::Builder::Level = $level + 2;
    Test::More::ok(0, $name);
    Test::More::diag($diag) if defined $diag;
    return 0;
}

sub _opts_timeout { return ($_[0] // 5) * Test::Nginx::timeout_scale() }

# handshake(%args) -> (status, \%headers, $body) and closes the connection
sub handshake {
    my (%args) = @_;
    my $ws = __PACKAGE__->connect(%args);
    my @r = ($ws->status, $ws->response_headers, $ws->response_body);
    $ws->disconnect;
    return @r;
}

# connect(port =>, host => '127.0.0.1', path => '/', protocols => ['pty-ws.v1'],
#   headers => { Name => value|undef }, timeout => 5, key => ..., version => 13,
#   request => $raw_request, auto_pong => 1, auto_close_reply => 1,
#   validate => 1, rcvbuf => bytes (SO_RCVBUF before connect),
#   before_rest => sub {...} (called with the object after the request's
#   first line is sent, before the rest))
sub connect {
    my ($class, %args) = @_;
    my $host = $args{host} // '127.0.0.1';
    my $port = $args{port} // Test::Nginx::port(8080);
    my $timeout = _opts_timeout($args{timeout});

    my $self = bless {
        host => $host, port => $port, timeout => $timeout,
        auto_pong => $args{auto_pong} // 1,
        auto_close_reply => $args{auto_close_reply} // 1,
        validate => $args{validate} // 1,
        rbuf => '', frames => [], json => [], pings => [],
        frag => undef, eof => 0, close_sent => 0, close_frame => undef,
        status => undef, headers => {}, body => '',
    }, $class;

    my $sock;
    if ($args{rcvbuf}) {
        # a small receive buffer set before connect: the window stays small
        $sock = IO::Socket::INET->new(Proto => 'tcp')
            or die "PtyWS: socket failed: $!\n";
        setsockopt($sock, Socket::SOL_SOCKET(), Socket::SO_RCVBUF(),
            $args{rcvbuf}) or die "PtyWS: SO_RCVBUF failed: $!\n";
        $sock->connect(Socket::pack_sockaddr_in($port,
            Socket::inet_aton($host)))
            or die "PtyWS: connect to $host:$port failed: $!\n";
    } else {
        $sock = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port,
            Proto => 'tcp', Timeout => $timeout)
            or die "PtyWS: connect to $host:$port failed: $!\n";
    }
    $sock->autoflush(1);
    binmode $sock;
    $sock->blocking(0);
    $self->{sock} = $sock;

    my $key = $args{key} // encode_base64(join('', map { chr rand 256 } 1 .. 16), '');
    $self->{key} = $key;

    my $req = $args{request} // $self->_handshake_request($key, %args);
    $self->{request} = $req;
    if ($args{before_rest}) {
        my $i = index($req, "\r\n") + 2;
        $self->send_raw(substr($req, 0, $i));
        $args{before_rest}->($self);
        $req = substr($req, $i);
    }
    $self->send_raw($req);
    $self->_read_response($timeout);
    return $self;
}

sub _handshake_request {
    my ($self, $key, %args) = @_;
    my $path = $args{path} // '/';
    my $protocols = exists $args{protocols} ? $args{protocols} : ['pty-ws.v1'];

    my @h = (
        [Host => "$self->{host}:$self->{port}"],
        [Upgrade => 'websocket'],
        [Connection => 'Upgrade'],
        ['Sec-WebSocket-Key' => $key],
        ['Sec-WebSocket-Version' => $args{version} // 13],
    );
    push @h, ['Sec-WebSocket-Protocol' => join(', ', @$protocols)]
        if $protocols && @$protocols;

    my $extra = $args{headers} // {};
    my @extra = ref $extra eq 'ARRAY' ? @$extra : map { [$_ => $extra->{$_}] } sort keys %$extra;
    for my $e (@extra) {
        my ($n, $v) = @$e;
        @h = grep { lc $_->[0] ne lc $n } @h unless ref $extra eq 'ARRAY';
        push @h, [$n => $v] if defined $v;
    }

    return "GET $path HTTP/1.1\r\n"
        . join('', map { "$_->[0]: $_->[1]\r\n" } @h) . "\r\n";
}

sub _read_response {
    my ($self, $timeout) = @_;
    my $deadline = time + $timeout;

    while ($self->{rbuf} !~ /\r\n\r\n/) {
        last unless $self->_fill($deadline);
    }
    my $i = index($self->{rbuf}, "\r\n\r\n");
    if ($i < 0) {
        $self->{status} = undef;
        $self->{response_raw} = $self->{rbuf};
        Test::More::diag("PtyWS: no handshake response (got: '$self->{rbuf}')");
        return;
    }
    my $head = substr($self->{rbuf}, 0, $i);
    substr($self->{rbuf}, 0, $i + 4) = '';
    $self->{response_raw} = "$head\r\n\r\n";

    my ($status_line, @lines) = split /\r\n/, $head;
    ($self->{status}) = $status_line =~ m{^HTTP/\d\.\d\s+(\d{3})};
    my %h;
    for (@lines) {
        my ($n, $v) = /^([^:]+):\s*(.*?)\s*$/ or next;
        $n = lc $n;
        $h{$n} = exists $h{$n} ? "$h{$n}, $v" : $v;
    }
    $self->{headers} = \%h;

    if (($self->{status} // 0) == 101) {
        $self->{upgraded} = 1;
        $self->_check_accept;
        return;
    }

    # refusal: read body by Content-Length or until EOF
    my $len = $h{'content-length'};
    while (!$self->{eof}) {
        last if defined $len && length $self->{rbuf} >= $len;
        last unless $self->_fill($deadline);
    }
    $self->{body} = defined $len ? substr($self->{rbuf}, 0, $len) : $self->{rbuf};
    $self->{rbuf} = '';
}

sub _check_accept {
    my ($self) = @_;
    my $want = encode_base64(sha1($self->{key} . $WS_GUID), '');
    my $got = $self->{headers}{'sec-websocket-accept'} // '';
    $self->{accept_ok} = $got eq $want;
    _fail('Sec-WebSocket-Accept is valid', "expected '$want', got '$got'")
        unless $self->{accept_ok};
}

sub status           { return $_[0]{status} }
sub response_headers { return $_[0]{headers} }
sub response_header  { return $_[0]{headers}{lc $_[1]} }
sub response_body    { return $_[0]{body} }
sub response_raw     { return $_[0]{response_raw} }
sub upgraded         { return $_[0]{upgraded} }
sub accept_ok        { return $_[0]{accept_ok} }
sub protocol         { return $_[0]{headers}{'sec-websocket-protocol'} }
sub socket           { return $_[0]{sock} }

###############################################################################
# low level I/O

# read more bytes into rbuf; false on EOF / timeout
sub _fill {
    my ($self, $deadline) = @_;
    return 0 if $self->{eof} || !$self->{sock};
    my $sel = IO::Select->new($self->{sock});
    while (1) {
        my $left = $deadline - time;
        return 0 if $left <= 0;
        next unless $sel->can_read($left);
        my $n = sysread($self->{sock}, my $buf, 65536);
        if (!defined $n) {
            next if $! == EINTR || $! == EAGAIN || $! == EWOULDBLOCK;
            $self->{eof} = 1;
            $self->{read_error} = "$!";
            return 0;
        }
        if ($n == 0) { $self->{eof} = 1; return 0 }
        $self->{rbuf} .= $buf;
        return 1;
    }
}

sub send_raw {
    my ($self, $bytes) = @_;
    my $sock = $self->{sock} or return 0;
    local $SIG{PIPE} = 'IGNORE';
    my $off = 0;
    my $deadline = time + $self->{timeout};
    my $sel = IO::Select->new($sock);
    while ($off < length $bytes) {
        my $n = syswrite($sock, $bytes, length($bytes) - $off, $off);
        if (!defined $n) {
            if ($! == EAGAIN || $! == EWOULDBLOCK || $! == EINTR) {
                return 0 if time > $deadline;
                $sel->can_write(0.05);
                next;
            }
            $self->{write_error} = "$!";
            return 0;
        }
        $off += $n;
    }
    return 1;
}

# build_frame(opcode =>, payload =>, fin => 1, mask => 1, rsv => 0,
#   mask_key => 4 bytes, len => 'min'|16|64)
sub build_frame {
    my (%f) = @_;
    my $payload = $f{payload} // '';
    my $fin = $f{fin} // 1;
    my $mask = $f{mask} // 1;
    my $rsv = $f{rsv} // 0;
    my $len = length $payload;
    my $enc = $f{len} // 'min';

    my $b = chr((($fin ? 1 : 0) << 7) | (($rsv & 7) << 4) | ($f{opcode} & 0xf));
    my $m = $mask ? 0x80 : 0;
    if ($enc eq 'min' && $len < 126) {
        $b .= chr($m | $len);
    } elsif ($enc eq '64' || ($enc eq 'min' && $len > 0xffff)) {
        $b .= chr($m | 127) . pack('NN', int($len / 2**32), $len % 2**32);
    } else {
        $b .= chr($m | 126) . pack('n', $len);
    }
    if ($mask) {
        my $key = $f{mask_key} // pack('N', int rand 2**32);
        $b .= $key;
        $payload = _mask($payload, $key);
    }
    return $b . $payload;
}

sub _mask {
    my ($data, $key) = @_;
    my $k = $key x (int(length($data) / 4) + 1);
    return $data ^ substr($k, 0, length $data);
}

# send_frame(%f): see build_frame
sub send_frame {
    my ($self, %f) = @_;
    return $self->send_raw(build_frame(%f));
}

sub send_text   { my ($s, $t, %o) = @_; $s->send_frame(opcode => OP_TEXT, payload => $t, %o) }
sub send_binary { my ($s, $t, %o) = @_; $s->send_frame(opcode => OP_BIN, payload => $t, %o) }
sub ping        { my ($s, $p) = @_; $s->send_frame(opcode => OP_PING, payload => $p // '') }
sub pong        { my ($s, $p) = @_; $s->send_frame(opcode => OP_PONG, payload => $p // '') }

# send_fragmented($payload, $n, opcode => 1, sizes => [..], %frame_opts):
# one message as $n fragments of (nearly) equal size, or of the given sizes
# (the rest goes into a last fragment).  Other options go to every frame.
sub send_fragmented {
    my ($self, $payload, $n, %o) = @_;
    my $opcode = delete $o{opcode} // OP_TEXT;
    my $sizes = delete $o{sizes};
    my @parts;
    if ($sizes) {
        push @parts, substr($payload, 0, $_, '') for @$sizes;
        push @parts, $payload if length $payload || !@parts;
    } else {
        $n = 1 if !$n || $n < 1;
        my $len = length $payload;
        for my $i (0 .. $n - 1) {
            my $from = int($len * $i / $n);
            push @parts, substr($payload, $from, int($len * ($i + 1) / $n) - $from);
        }
    }
    for my $i (0 .. $#parts) {
        $self->send_frame(%o, opcode => $i ? OP_CONT : $opcode,
            payload => $parts[$i], fin => $i == $#parts ? 1 : 0)
            or return 0;
    }
    return 1;
}

# send_json(\%frame): fills id (UUIDv7) and ts if absent; returns id
sub send_json {
    my ($self, $h) = @_;
    my %f = %$h;
    $f{id} //= uuid_v7();
    $f{ts} //= rfc3339_now();
    $self->send_text(json_encode(\%f)) or return undef;
    return $f{id};
}

# send_op($op, $payload, %extras): returns id
sub send_op {
    my ($self, $op, $payload, %extras) = @_;
    return $self->send_json({ op => $op, payload => $payload, %extras });
}

sub close {
    my ($self, $code, $reason) = @_;
    my $p = defined $code ? pack('n', $code) . ($reason // '') : '';
    $self->{close_sent} = 1;
    return $self->send_frame(opcode => OP_CLOSE, payload => $p);
}

sub disconnect {
    my ($self) = @_;
    if ($self->{sock}) {
        CORE::close($self->{sock});
        $self->{sock} = undef;
    }
    $self->{eof} = 1;
}

# half-close our side (FIN) while still reading
sub shutdown_write {
    my ($self) = @_;
    shutdown($self->{sock}, 1) if $self->{sock};
}

###############################################################################
# receiving

# parse one frame from rbuf; undef if incomplete
sub _parse_frame {
    my ($self) = @_;
    my $buf = \$self->{rbuf};
    return undef if length $$buf < 2;
    my ($b0, $b1) = unpack('CC', $$buf);
    my $masked = $b1 & 0x80;
    my $len = $b1 & 0x7f;
    my $off = 2;
    if ($len == 126) {
        return undef if length $$buf < 4;
        $len = unpack('n', substr($$buf, 2, 2));
        $off = 4;
    } elsif ($len == 127) {
        return undef if length $$buf < 10;
        my ($h, $l) = unpack('NN', substr($$buf, 2, 8));
        $len = $h * 2**32 + $l;
        $off = 10;
    }
    my $key;
    if ($masked) {
        return undef if length $$buf < $off + 4;
        $key = substr($$buf, $off, 4);
        $off += 4;
    }
    return undef if length $$buf < $off + $len;
    my $payload = substr($$buf, $off, $len);
    substr($$buf, 0, $off + $len) = '';
    $payload = _mask($payload, $key) if $masked;

    my $f = {
        opcode => $b0 & 0x0f, fin => ($b0 >> 7) & 1, rsv => ($b0 >> 4) & 7,
        masked => $masked ? 1 : 0, payload => $payload,
    };
    if ($f->{opcode} == OP_CLOSE) {
        if (length $payload >= 2) {
            $f->{code} = unpack('n', $payload);
            $f->{reason} = substr($payload, 2);
        }
    }
    return $f;
}

sub _next_raw {
    my ($self, $deadline) = @_;
    while (1) {
        my $f = $self->_parse_frame;
        return $f if $f;
        return undef unless $self->_fill($deadline);
    }
}

# recv_frame($timeout, raw => 0): next message (fragments reassembled) or
# control frame.  Pings are answered automatically (recorded in pings_seen)
# unless auto_pong => 0.  Close frames: {opcode => 8, code, reason}; a close
# reply is sent unless auto_close_reply => 0.  undef on timeout / EOF.
sub recv_frame {
    my ($self, $timeout, %opts) = @_;
    return $self->_recv_frame_dl(time + _opts_timeout($timeout), %opts);
}

sub _recv_frame_dl {
    my ($self, $deadline, %opts) = @_;
    while (1) {
        my $f = $self->_next_raw($deadline) or return undef;
        push @{$self->{frames}}, $f;
        return $f if $opts{raw};

        my $op = $f->{opcode};
        if ($op == OP_PING) {
            push @{$self->{pings}}, $f;
            if ($self->{auto_pong}) {
                $self->pong($f->{payload});
                next;
            }
            return $f;
        }
        if ($op == OP_CLOSE) {
            $self->{close_frame} = $f;
            if ($self->{auto_close_reply} && !$self->{close_sent}) {
                $self->{close_sent} = 1;
                $self->send_frame(opcode => OP_CLOSE,
                    payload => defined $f->{code} ? pack('n', $f->{code}) : '');
            }
            return $f;
        }
        return $f if $op == OP_PONG;

        if ($op == OP_CONT) {
            if (!$self->{frag}) {
                $self->{protocol_errors}++;
                return $f;    # unexpected continuation: give it to caller
            }
            $self->{frag}{payload} .= $f->{payload};
            next unless $f->{fin};
            my $m = delete $self->{frag};
            $m->{fin} = 1;
            return $m;
        }
        if (!$f->{fin}) {
            $self->{frag} = { %$f, fragmented => 1 };
            next;
        }
        return $f;
    }
}

# recv_json($timeout): next text message decoded (and validated); undef on
# timeout, close or EOF (close available via close_frame)
sub recv_json {
    my ($self, $timeout) = @_;
    return $self->_recv_json_dl(time + _opts_timeout($timeout));
}

sub _recv_json_dl {
    my ($self, $deadline) = @_;
    while (1) {
        my $f = $self->_recv_frame_dl($deadline) or return undef;
        if ($f->{opcode} == OP_CLOSE) { return undef }
        next unless $f->{opcode} == OP_TEXT;
        return $self->_decode_text($f);
    }
}

sub _decode_text {
    my ($self, $f) = @_;
    my $d = eval { json_decode($f->{payload}) };
    if (!defined $d) {
        _fail('server frame is valid JSON', "frame: $f->{payload}\nerror: $@");
        return undef;
    }
    if ($self->{validate}) {
        my @err = validate_frame($f->{payload});
        if (@err) {
            _fail('server frame matches pty-ws/v1 schema',
                join("\n", "frame: $f->{payload}", map { "  $_" } @err));
            $self->{invalid_frames}++;
        }
    }
    $f->{json} = $d;
    push @{$self->{json}}, $d;
    return $d;
}

# recv_until(sub { my $msg = shift; ... }, $timeout, $description):
# decoded JSON messages up to and including the first one matching.
# On timeout / close / EOF records a failing test and returns what was got.
sub recv_until {
    my ($self, $pred, $timeout, $desc) = @_;
    $timeout //= 5;
    my $deadline = time + _opts_timeout($timeout);
    my @got;
    $self->{matched} = 0;
    while (1) {
        my $m = $self->_recv_json_dl($deadline);
        if (!defined $m) {
            my $why = $self->{close_frame}
                ? "close frame (" . ($self->{close_frame}{code} // 'no code') . ")"
                : $self->{eof} ? 'EOF' : "timeout (${timeout}s)";
            _fail('recv_until: ' . ($desc // 'expected frame'), "$why; received:\n"
                . join("\n", map { '  ' . json_encode($_) } @got));
            return wantarray ? @got : undef;
        }
        push @got, $m;
        local $_ = $m;
        if ($pred->($m)) {
            $self->{matched} = 1;
            return wantarray ? @got : $m;
        }
    }
}

# recv_match($pred, $timeout, $desc): only the matching message.  On
# failure (already recorded as a failing test) returns {} so that
# $ws->recv_op(...)->{field} does not die.
sub recv_match {
    my ($self, @a) = @_;
    my @got = $self->recv_until(@a);
    return {} unless @got && $self->{matched};
    return $got[-1];
}

# recv_op($op, $timeout): first message with that op ({} on failure)
sub recv_op {
    my ($self, $op, $timeout) = @_;
    return $self->recv_match(sub { ($_[0]{op} // '') eq $op }, $timeout,
        "op $op");
}

# wait_close($timeout): (code, reason) of the server's close frame; undef if
# the connection ended (or timed out) without one
sub wait_close {
    my ($self, $timeout) = @_;
    my $deadline = time + _opts_timeout($timeout);
    while (!$self->{close_frame}) {
        my $f = $self->_recv_frame_dl($deadline) or last;
        $self->_decode_text($f) if $f->{opcode} == OP_TEXT;
    }
    my $c = $self->{close_frame} or return;
    return wantarray ? ($c->{code}, $c->{reason}) : $c->{code};
}

# wait_eof($timeout): true when the server closed the TCP connection
sub wait_eof {
    my ($self, $timeout) = @_;
    my $deadline = time + _opts_timeout($timeout);
    while (!$self->{eof}) {
        last if time > $deadline;
        my $f = $self->_next_raw($deadline);
        push @{$self->{frames}}, $f if $f;
    }
    return $self->{eof};
}

sub is_closed   { return $_[0]{close_frame} || $_[0]{eof} ? 1 : 0 }
sub eof         { return $_[0]{eof} }
sub close_frame { return $_[0]{close_frame} }
sub frames_seen { return @{$_[0]{frames}} }
sub json_seen   { return @{$_[0]{json}} }
sub pings_seen  { return @{$_[0]{pings}} }
sub invalid_frames { return $_[0]{invalid_frames} // 0 }

###############################################################################
# pty-extensions helpers

# payload.kind of a pty.session_frame message (decoded JSON or raw frame)
sub session_frame_kind {
    my ($f) = @_;
    $f = $f->{json} if ref $f eq 'HASH' && exists $f->{json};
    return undef unless ref $f eq 'HASH' && ($f->{op} // '') eq 'pty.session_frame';
    return ref $f->{payload} eq 'HASH' ? $f->{payload}{kind} : undef;
}

# concatenated base64-decoded data of Output session frames
sub decode_output {
    my (@frames) = @_;
    my $out = '';
    for my $f (@frames) {
        next unless (session_frame_kind($f) // '') eq 'Output';
        $f = $f->{json} if exists $f->{json};
        $out .= decode_base64($f->{payload}{data} // '');
    }
    return $out;
}

sub DESTROY {
    my ($self) = @_;
    CORE::close($self->{sock}) if $self->{sock};
}

1;
