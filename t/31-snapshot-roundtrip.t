#!/usr/bin/perl

# The snapshot round trip on real sessions: a controller joined before the
# program writes anything collects every Output frame; a Keyframe asked
# for with pty.request_keyframe must paint, into a reset terminal of its
# size, exactly the screen those Output frames (sequence <= its anchor)
# paint.  build/vtcompare judges with libvterm (cells, pens, cursor, modes);
# for top, whose full-width bars end in EL at a pending wrap, which xterm.js
# (and the model) read otherwise than libvterm, @xterm/headless judges
# (t/xterm/difftest.js, as t/69-xterm-keyframes.t).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use File::Spec;
use JSON::PP ();
use MIME::Base64 qw(decode_base64);
use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyWS qw(decode_output);

my $vtcompare = File::Spec->catfile($Test::Nginx::REPO_ROOT, 'build',
    'vtcompare');
plan(skip_all => "no $vtcompare (run make)") unless -x $vtcompare;

my $t = pty_nginx();
$t->plan(27)->run();

my $n = 0;

my $xterm = "$FindBin::Bin/xterm";
my $node = `sh -c 'command -v node'` =~ s/\s+$//r;

# the stream and the Keyframe in both xterm.js versions: '' when the same
sub xterm_judge {
    my ($name, $stream, $kf, $cols, $rows) = @_;
    return "no node or t/xterm/node_modules (make xterm)\n"
        unless $node && -f "$xterm/node_modules/.package-lock.json";
    my $case = { cols => $cols, rows => $rows,
        ops => [ { x => unpack('H*', $stream) } ],
        keyframe => { at => 1, snapshot => $kf->{snapshot} // '',
            cols => $kf->{snapshot_cols}, rows => $kf->{snapshot_rows} } };
    $t->write_file("$name.case.json", JSON::PP->new->encode($case));
    my $out = `$node $xterm/difftest.js --cases ${\$t->testdir()}/$name.case.json 2>&1`;
    return $out =~ /^1 passed, 0 failed$/m ? '' : $out;
}

# roundtrip(name, command, regex the output reaches, cols, rows, judge):
# the program waits for Enter, so the join comes before its first byte
# but its prompt (which says it runs and reads input)
sub roundtrip {
    my ($name, $cmd, $re, $cols, $rows, $judge) = @_;
    $n++;
    my $s = start_session($t, "read -p go? x; $cmd", cols => $cols,
        rows => $rows);
    my $ws = attach($t, $s);
    $ws->recv_json(5);
    # replay_from 0: whatever the session wrote before the join comes too
    my @f = join_flush($ws, replay_from => 0);
    push @f, go($ws, @f);

    my $out = '';
    push @f, $ws->recv_until(sub { $out .= decode_output($_[0]);
        $out =~ $re }, 10, "$name: the output reaches its marker");

    $ws->send_op('pty.request_keyframe', {});
    push @f, $ws->recv_until(sub { kind($_[0]) eq 'Keyframe' }, 5,
        "$name: the requested Keyframe");
    my $kf = $f[-1]{payload};
    $ws->disconnect;

    my @out = grep { kind($_) eq 'Output' } @f;
    my $anchor = $kf->{anchor_sequence} // -1;
    is($anchor, @out ? $out[-1]{sequence} : undef,
        "$name: anchor_sequence is the last Output received");

    my $stream = join '', map { decode_output($_) }
        grep { $_->{sequence} <= $anchor } @out;
    ok(!(grep { kind($_) eq 'Resize' } @f)
        && ($kf->{snapshot_cols} // 0) == $cols
        && ($kf->{snapshot_rows} // 0) == $rows,
        "$name: ${cols}x$rows throughout");

    my $sf = $t->testdir() . "/stream$n";
    my $kf_file = $t->testdir() . "/snapshot$n";
    $t->write_file("stream$n", $stream);
    $t->write_file("snapshot$n", decode_base64($kf->{snapshot} // ''));
    if (($judge // '') eq 'xterm') {
        (my $file = $name) =~ s/\W/_/g;
        my $diff = xterm_judge($file, $stream, $kf, $cols, $rows);
        is($diff, '', "$name: the snapshot paints what the stream painted "
            . '(xterm.js)');
        return $stream;
    }

    my $diff = `$vtcompare $cols $rows $sf $kf_file 2>&1`;
    my $rc = $? >> 8;
    is($rc, 0, "$name: the snapshot paints what the stream painted")
        or diag("vtcompare ($rc), stream of " . length($stream)
            . " bytes:\n$diff");
    return $stream;
}

roundtrip('seq', 'seq 1 200; echo MARK""ER; read y', qr/MARKER\r\n/, 80, 24);
roundtrip('ls', 'ls -la /usr; echo MARK""ER; read y', qr/MARKER\r\n/, 80, 24);

my $st = roundtrip('ls colour', 'ls --color=always -la /usr/bin | head -100; '
    . 'echo MARK""ER; read y', qr/MARKER\r\n/, 120, 30);
like($st, qr/\e\[[0-9;]*m/, 'ls colour: there were colours');

# 256 colours (fg and bg), truecolour ramps, attributes, a coloured erase
$st = roundtrip('sgr', 'for i in $(seq 0 255); do printf "\e[38;5;${i}m'
    . '\e[48;5;$(( 255 - i ))mX"; done; printf "\e[m\n"; for i in '
    . '$(seq 0 8 255); do printf "\e[38;2;$i;$(( 255 - i ));128m#'
    . '\e[48;2;0;$i;255m \e[1;3;4;7;9m*\e[m"; done; '
    . 'printf "\e[44m\e[K\e[m\n\e[2;5;21;53mend\e[m\n"; echo MARK""ER; '
    . 'read y',
    qr/MARKER\r\n/, 80, 24);
like($st, qr/\e\[38;2;/, 'sgr: truecolour written');

# UTF-8: mixed scripts, combining marks, emoji; wide glyphs at the
# right edge (one that does not fit and wraps, one that fills the row
# and leaves the wrap pending)
roundtrip('utf8', 'c=$(stty size | cut -d" " -f2); '
    . 'printf "caf\\xc3\\xa9 e\\xcc\\x81 \\xe4\\xb8\\xad\\xe6\\x96\\x87 '
    . '\\xe6\\x97\\xa5\\xe6\\x9c\\xac\\xe8\\xaa\\x9e \\xf0\\x9f\\x98\\x80'
    . '\\xf0\\x9f\\x91\\x8d \\xd0\\x9f\\xd1\\x80\\xd0\\xb8 \\xce\\xb1\\xce\\xb2'
    . ' \\xe2\\x82\\xac\\n"; '
    . 'printf "%*s\\xe4\\xb8\\xad\\n" $((c - 1)) x; '
    . 'printf "%*s\\xe4\\xb8\\xad\\xe6\\x96\\x87\\n" $((c - 3)) y; '
    . 'printf "%*s\\xf0\\x9f\\x98\\x80" $((c - 2)) z; echo; '
    . 'echo MARK""ER; printf "%*s\\xe6\\x96\\x87" $((c - 2)) w; read y',
    qr/MARKER\r\n.*w\xe6\x96\x87/s, 80, 24);

SKIP: {
    skip 'no vi', 3 unless -x '/usr/bin/vi' || -x '/bin/vi';
    skip 'no /etc/services', 3 unless -r '/etc/services';
    roundtrip('vi', 'TERM=xterm-256color vi -u NONE /etc/services',
        qr/"\/etc\/services"/, 100, 30);
}

SKIP: {
    skip 'no top', 7 unless -x '/usr/bin/top' || -x '/bin/top';
    $st = roundtrip('top', 'top -d 0.2', qr/(?:top - .*){3}/s, 100, 30,
        'xterm');
    like($st, qr/\e\[H/, 'top: full-screen redraws');
    roundtrip('top small', 'top -d 0.2', qr/(?:top - .*){3}/s, 60, 12,
        'xterm');
}
