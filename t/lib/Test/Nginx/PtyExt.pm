package Test::Nginx::PtyExt;

# Test::Nginx::PtyExt - what the pty-extensions/v1 conformance tests share.
#
#   my $ws = attach($t, $s);  my $hello = $ws->recv_json(5);
#   my @flush = join_flush($ws, role => 'observer', replay_from => 7);
#       # sends pty.join_session, returns every frame up to and including
#       # the joiner's own Keyframe (the first one after its RoleAssigned)
#   kind($frame)         payload.kind of a session frame, else the op
#   without_output(@f)   the frames that are not Output
#   drain($ws, $secs)    every frame until none came for $secs
#   SHELL                bash with the prompt "ready$ " and no rc files
#   go($ws, @seen)       for a program started as "read -p go? x; ...":
#                        waits for the prompt (input sent earlier than the
#                        session runs is refused), sends Enter; returns
#                        the frames it read

use strict;
use warnings;

use Exporter qw(import);
use MIME::Base64 ();
use Test::More ();

use Test::Nginx::PtyWS qw(session_frame_kind);
use Test::Nginx::Pty qw(EXT_URI send_input joiner_keyframe);

our @EXPORT = qw(join_flush kind without_output drain seqs SHELL
    ready_shell go);

use constant SHELL => 'PS1="ready\$ " exec bash --norc --noprofile -i';

sub kind {
    return session_frame_kind($_[0]) // $_[0]{op};
}

sub without_output {
    return grep { kind($_) ne 'Output' } @_;
}

sub seqs {
    return map { $_->{sequence} } grep { defined $_->{sequence} } @_;
}

sub drain {
    my ($ws, $secs) = @_;
    my @f;
    while (my $m = $ws->recv_json($secs)) {
        push @f, $m;
    }
    return @f;
}

sub join_flush {
    my ($ws, %o) = @_;
    my %payload = (role => $o{role} // 'controller');
    $payload{client_label} = $o{label} if defined $o{label};
    $payload{cols} = $o{cols} if $o{cols};
    $payload{rows} = $o{rows} if $o{rows};
    my %env;
    $env{extensions} = [EXT_URI] unless $o{no_activation};
    $env{replay_from} = $o{replay_from} if exists $o{replay_from};
    $ws->send_json({ op => 'pty.join_session', payload => \%payload, %env });

    return $ws->recv_until(joiner_keyframe(), $o{timeout} // 10,
        'the joiner\'s Keyframe');
}

# waits for the "ready$ " prompt on a joined connection; @seen: frames
# already received (a prompt printed before the join is only in the
# joiner's Keyframe, its text the screen's last)
sub ready_shell {
    my ($ws, @seen) = @_;
    my $out = '';
    my $ready = sub {
        for my $f (@_) {
            if (kind($f) eq 'Keyframe') {
                $out = MIME::Base64::decode_base64($f->{payload}{snapshot});
                $out =~ s/\e\[[0-9;:?]*[ -\/]*[\@-~]|\e[()*+]?.//g;
                $out =~ s/ +$/ /;
            } else {
                $out .= Test::Nginx::PtyWS::decode_output($f);
            }
        }
        return $out =~ /ready\$ $/;
    };
    return $out if $ready->(@seen);
    $ws->recv_until(sub { $ready->($_[0]) }, 10, 'the shell prompt');
    return $out;
}

sub go {
    my ($ws, @seen) = @_;
    my $out = Test::Nginx::PtyWS::decode_output(@seen);
    my @f;
    @f = $ws->recv_until(sub {
        $out .= Test::Nginx::PtyWS::decode_output($_[0]);
        $out =~ /go\?$/;
    }, 10, 'the go? prompt') unless $out =~ /go\?$/;
    send_input($ws, "\r");
    return @f;
}

1;
