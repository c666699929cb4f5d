#!/usr/bin/perl

# Keyframes that xterm.js renders exactly.  Two @xterm/headless terminals
# (5.5.0, the demo page's, and 6.0.0), one fed the whole stream, one fed
# a Keyframe and the Output after its anchor_sequence, must be identical:
# every cell (character, width, attributes, colours), soft-wrap flags,
# cursor, active buffer, modes, character sets, tab stops, margins, the
# saved cursor, the pen, the title (t/xterm/xtstate.js, t/xterm/difftest.js).
#
# 1. The scenario classes through nginx, as a web IDE sees them: a session
#    prints the case's parts, the controller resizes between them where
#    the case does, a late joiner gets its Keyframe where the case has
#    it; the Output and Resize frames of a client that watched from the
#    start and the late joiner's Keyframe and Output go to the comparison.
# 2. The same corpus (t/xterm/corpus) through build/vtpair, which runs the
#    module's own snapshot code, with the Keyframe between the parts.
#    A case that shows one of xterm.js's own errors names it
#    ("xterm_error", t/xterm/xtfixes.js): it must differ as it is and be
#    the same with that error fixed in xterm.js.
# 3. The classes known to differ still (t/xterm/known): TODO, one each.
# 4. Random streams of the classes that pass (gen.js): XTERM_STREAMS of
#    them (default 2000; 300 under CI), a quarter as many with resizes
#    before and after the Keyframe, a quarter as many of SGR, tabs,
#    cursor moves, erases, line edits, long lines and character sets,
#    a quarter as many with REP, a quarter as many of saved cursors,
#    modes and character sets, a quarter as many of wide glyphs with
#    erases, ICH and DCH, and of wide glyphs with DECSCA and SGR, and a
#    quarter as many of DECSCA and the selective erases, seed XTERM_SEED
#    (default: the day), and a quarter as many of every class at once
#    (a fixed seed; so has the saved cursors' set).
#    The full run: node t/xterm/difftest.js --random 100000 (every class
#    but REP and DECSCA, as the last set; docs/SNAPSHOT.md).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use JSON::PP ();
use MIME::Base64 qw(decode_base64);
use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyWS qw(decode_output session_frame_kind);
use Test::Nginx::PtyAPI qw(api_call);

my $dir = "$FindBin::Bin/xterm";
my $node = `sh -c 'command -v node'` =~ s/\s+$//r;

die "node is missing: scripts/install-deps.sh installs it\n" unless $node;
die "t/xterm/node_modules is missing: run make xterm (npm ci in t/xterm)\n"
    unless -f "$dir/node_modules/.package-lock.json";

my $json = JSON::PP->new->utf8->canonical;

# passed (with those xterm.js itself throws on: not judged, and those
# that differ only through an error of xterm.js's, t/xterm/xtfixes.js),
# failed, output
sub difftest {
    my (@args) = @_;
    my $out = `$node $dir/difftest.js @args 2>&1`;
    my ($pass, $fail) = $out =~ /^(\d+) passed, (\d+) failed$/m;
    my ($skip) = $out =~ /^(\d+) skipped/m;
    my $xt = 0;
    $xt += $_ for $out =~ /^(\d+) differ through xterm\.js error/mg;
    return (($pass // 0) + ($skip // 0) + $xt, $fail // -1, $out);
}

sub read_case {
    my ($f) = @_;
    open my $fh, '<', $f or die "$f: $!\n";
    local $/;
    return $json->decode(<$fh>);
}

sub bytes_of {
    my ($op) = @_;
    return pack('H*', $op->{x}) if defined $op->{x};
    my $d = $op->{d};
    utf8::encode($d);
    return $d;
}

my @corpus = sort glob "$dir/corpus/*.json";
my @known = sort glob "$dir/known/*.json";

# --- 1. through nginx -------------------------------------------------------

my $t = pty_nginx();
$t->run();

# a case's ops as the parts a program prints: each part's bytes, then the
# controller's resizes, then maybe the Keyframe (a late joiner attaches)
sub parts_of {
    my (@ops) = @_;
    my @parts = ({ bytes => '', resizes => [] });

    for my $op (@ops) {
        if ($op->{keyframe}) {
            $parts[-1]{kf} = 1;
            push @parts, { bytes => '', resizes => [] };

        } elsif ($op->{resize}) {
            push @{$parts[-1]{resizes}}, $op->{resize};

        } else {
            push @parts, { bytes => '', resizes => [] }
                if @{$parts[-1]{resizes}} || $parts[-1]{kf};
            $parts[-1]{bytes} .= bytes_of($op);
        }
    }

    # (no Keyframe in the case: the late joiner comes at the end)
    $parts[-1]{kf} = 1 unless grep { $_->{kf} } @parts;

    return @parts;
}

sub out_length {
    my ($h, $from) = @_;
    return length join '', map { $h->{$_} } grep { $_ > $from } keys %$h;
}

my $n = 0;
for my $file (@corpus) {
    my $c = read_case($file);
    my @parts = parts_of(@{$c->{ops}});
    (my $name = $file) =~ s{.*/|\.json$}{}g;
    my $td = $t->testdir;

    # each part printed when the test says so (a line on the terminal);
    # an SGR 0 first says the terminal is raw: a newline sent before
    # that would be echoed into the stream
    my $cmd = "stty raw -echo; printf '\\033[m'";
    for my $i (0 .. $#parts) {
        $t->write_file("$name.$i", $parts[$i]{bytes});
        $cmd .= "; cat $td/$name.$i; read x";
    }

    my $s = start_session($t, $cmd, cols => $c->{cols}, rows => $c->{rows});

    # the client that watches from the start (replayed from the first frame)
    my ($early, undef, @replay) = attach_join($t, $s, replay_from => 0);
    my (%out, %resized, $late, @flush, $kf);
    collect(\%out, $_) for @replay;

    my ($want, @size) = (length "\e[m", $c->{cols}, $c->{rows});
    for my $i (0 .. $#parts) {
        my $p = $parts[$i];
        Test::Nginx::Pty::send_input($early, "\n") if $i > 0;
        $want += length $p->{bytes};
        $early->recv_until(sub { collect(\%out, $_[0]);
            out_length(\%out, -1) >= $want }, 10, "$name: part $i")
            if out_length(\%out, -1) < $want;

        for my $rs (@{$p->{resizes}}) {
            my ($cols, $rows) = @$rs;
            next if $cols == $size[0] && $rows == $size[1];
            @size = ($cols, $rows);
            $early->send_op('pty.session_resize',
                { cols => $cols, rows => $rows });
            $early->recv_until(sub { collect(\%out, $_[0]);
                resized(\%resized, $_[0]) && $_[0]{payload}{cols} == $cols
                    && $_[0]{payload}{rows} == $rows }, 10,
                "$name: resized");
        }

        next unless $p->{kf};

        # the late joiner
        ($late, undef, @flush) = attach_join($t, $s, role => 'observer');
        ($kf) = grep { (session_frame_kind($_) // '') eq 'Keyframe' } @flush;
    }

    my $anchor = $kf ? $kf->{payload}{anchor_sequence} : 0;
    my %late_out;
    collect(\%late_out, $_) for @flush;
    my $after = out_length(\%out, $anchor);
    $late->recv_until(sub { collect(\%late_out, $_[0]);
        out_length(\%late_out, $anchor) >= $after }, 10,
        "$name: the late joiner's rest")
        if $after;

    my @seq = sort { $a <=> $b } keys %out;
    my @late_seq = sort { $a <=> $b } grep { $_ > $anchor } keys %late_out;
    is(join(',', @late_seq), join(',', grep { $_ > $anchor } @seq),
        "$name: the late joiner gets the Output after anchor_sequence");

    # the Output and the Resize frames in sequence order
    my @all = sort { $a <=> $b } @seq, keys %resized;
    my $case = {
        cols => $c->{cols}, rows => $c->{rows},
        $c->{xterm_error} ? (xterm_error => $c->{xterm_error}) : (),
        ops => [ map { $resized{$_} ? { resize => $resized{$_} }
                                    : { x => unpack('H*', $out{$_}) } } @all ],
        keyframe => {
            at => scalar(grep { $_ <= $anchor } @all),
            snapshot => $kf ? $kf->{payload}{snapshot} : '',
            cols => $kf ? $kf->{payload}{snapshot_cols} : $c->{cols},
            rows => $kf ? $kf->{payload}{snapshot_rows} : $c->{rows},
        },
    };
    $t->write_file("$name.case.json", $json->encode($case));
    my ($pass, $fail, $log) = difftest('--cases', "$td/$name.case.json");
    # (the case as nginx made it goes to the log: its frames' timing varies)
    ok($pass == 1 && $fail == 0, "$name: through nginx, xterm.js shows the "
        . 'same screen to the late joiner')
        or diag($log . "\nthe case:\n" . $json->encode($case));

    $early->close;
    $late->close;

    # (a session holds a connection of the worker's: hundreds would not fit)
    my ($st) = api_call($t->port(8080), '/pty/kill', { id => $s->{id} });
    die "$name: kill answered " . ($st // 'nothing') . "\n"
        unless defined $st && $st == 200;
    $n++;
}
cmp_ok($n, '>=', 15, "$n scenario classes through nginx");

sub resized {
    my ($h, $m) = @_;
    return 0 unless ($m->{op} // '') eq 'pty.session_frame';
    return 0 unless (session_frame_kind($m) // '') eq 'Resize';
    $h->{$m->{sequence}} = [ $m->{payload}{cols}, $m->{payload}{rows} ];
    return 1;
}

sub collect {
    my ($h, $m) = @_;
    return unless ($m->{op} // '') eq 'pty.session_frame';
    return unless (session_frame_kind($m) // '') eq 'Output';
    $h->{$m->{sequence}} = decode_base64($m->{payload}{data});
}

# --- 2. the corpus through build/vtpair -------------------------------------

my ($pass, $fail, $log) = difftest('--quiet', '--cases', @corpus);
ok($fail == 0 && $pass == @corpus, 'corpus: ' . scalar(@corpus)
    . ' cases, Keyframe and stream the same in both xterm.js versions')
    or diag($log);

# --- 3. known differences ------------------------------------------------------

TODO: {
    local $TODO = 'not restored yet (docs/SNAPSHOT.md, Known differences)';
    for my $file (@known) {
        (my $name = $file) =~ s{.*/|\.json$}{}g;
        my ($p, $f) = difftest('--quiet', '--cases', $file);
        ok($f == 0 && $p == 1, "known: $name");
    }
}

# --- 4. random streams ----------------------------------------------------------

my $streams = $ENV{XTERM_STREAMS} // ($ENV{CI} ? 300 : 2000);
my $seed = $ENV{XTERM_SEED} // int(time / 86400);
my $quarter = int($streams / 4) || 1;

# [how many, gen.js classes, what they are]
my @sets = (
    [$streams, 'text,wide,combining', 'text and wide glyphs'],

    # reflow, rows from and into the scrollback (the late joiner's comes
    # with its Keyframe)
    [$quarter, 'text,wide,wrap,resize,late-resize',
     'text and wide glyphs with resizes before and after the Keyframe'],

    [$quarter, 'text,sgr,tabs,cursor,erase,lines,wrap,charsets',
     'SGR, tabs, cursor moves, erases, line edits and character sets'],

    # ncurses' rep
    [$quarter, 'text,rep,sgr,cursor,erase,lines,wrap',
     'REP with text, SGR, cursor moves and erases'],

    # DECSC, DECRC and ?1049, which xterm.js restores otherwise than
    # libvterm (the character set in use among them); a fixed seed: a
    # set a DECRC gave back, then the alternate screen entered, is a
    # known difference these streams reach about once in 2,000
    [$quarter, 'text,cursor,wrap,modes,charsets',
     'saved cursors, modes and character sets with text', 1305],

    # erases, ICH and DCH that cut wide glyphs in two, the halves left
    [$quarter, 'text,wide,erase,cursor,wrap',
     'wide glyphs with erases, ICH, DCH, cursor moves and long lines'],

    # the same with SGR, DECSCA and long lines: the blanks in a whole pen
    # (or protected) that a glyph over half a wide one leaves
    [$quarter, 'text,wide,protect,sgr,erase,cursor,wrap,lines',
     'wide glyphs with DECSCA, SGR, erases and long lines'],

    # wide glyphs with autowrap off, origin mode and the other modes:
    # the cursor past the edge after a wide glyph there (the glyph after
    # it cuts it, a move starts from the last column)
    [$quarter, 'text,wide,modes,cursor,wrap',
     'wide glyphs with the modes, cursor moves and long lines'],

    # DECSCA, which xterm.js's SGR 0 and DECRC change too, and the
    # selective erases it protects from
    [$quarter, 'text,protect,erase,cursor,wrap,lines,charsets',
     'DECSCA and selective erases with text, cursor moves and erases'],

    # every class at once; a fixed seed: the known differences
    # (t/xterm/known) reach up to 3 in 100,000 of these (seeds
    # 1100-1719; docs/SNAPSHOT.md)
    [$quarter, 'text,lines,wide,combining,sgr,cursor,erase,scroll,modes,'
     . 'charsets,tabs,wrap,resize,late-resize', 'every class at once', 500],
);

for my $set (@sets) {
    my ($n, $classes, $what, $fixed) = @$set;
    my $sd = $fixed // $seed;

    ($pass, $fail, $log) = difftest('--quiet', '--random', $n,
        '--seed', $sd, '--classes', $classes, '--max-fail', 3);
    ok($fail == 0 && $pass == $n, "$n random streams of $what (seed $sd)")
        or diag($log);
}

$t->done_testing();
