#!/usr/bin/perl

# With pty_allow a command runs without a shell: every way a shell would
# read more into it is refused (403 JSON), the rules see the words, and
# the program gets its words exactly as quoted.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAgent;

my $t = pty_nginx();
my $dir = $t->testdir();
my $w = "$dir/w";
mkdir $w or die "mkdir $w: $!";
chmod 0777, $w;

my $conf = $t->read_file('nginx.conf');
$conf =~ s/(location \/pty\/ \{)/location \/strict\/ {
            pty_api;
            pty_allow "^(top|python3|cat|printf)( |\$)";
            pty_deny "(^|[;&|`]\\s*)(rm|mkfs|dd|shutdown)\\b";
        }
        location \/nosuch\/ {
            pty_api;
            pty_allow "^nosuch-program-here";
        }

        $1/;
$t->write_file('nginx.conf', $conf);

# the reported spellings, and more of what only a shell acts on
my @bypass = (
    [ "/bin/rm -f $w/victim",            'not_allowed' ],
    [ "\\rm -f $w/victim",               undef ],
    [ "'rm' -f $w/victim",               undef ],
    [ "\$(echo rm) -f $w/victim",        'needs_shell' ],
    [ "env rm -f $w/victim",             'not_allowed' ],
    [ "cat\nrm -f $w/victim",            'needs_shell' ],
    [ "bash -c 'rm -f $w/victim'",       'not_allowed' ],
    [ "find $w -name victim -delete",    'not_allowed' ],
    [ "top -b -n1; touch $w/M1",         'needs_shell' ],
    [ "cat && touch $w/M2",              'needs_shell' ],
    [ "cat | touch $w/M3",               'needs_shell' ],
    [ "`echo rm` -f $w/victim",          'needs_shell' ],
    [ "cat > $w/victim",                 'needs_shell' ],
    [ "top -b -n1 & touch $w/M4",        'needs_shell' ],
    [ "FOO=1 rm -f $w/victim",           'needs_shell' ],
    [ "cat $w/vic*",                     'needs_shell' ],
    [ "cat ~/x",                         'needs_shell' ],
    [ "cat # x",                         'needs_shell' ],
    [ "cat <$w/victim",                  'needs_shell' ],
    [ "printf \"\$(touch $w/M5)\"",      'needs_shell' ],
    [ "cat {a,b}",                       'needs_shell' ],
    [ "cat 'unterminated",               'needs_shell' ],
    [ "cat \\\n x",                      'needs_shell' ],
    [ "$w/python3",                      'not_allowed' ],
    [ "python3x",                        'not_allowed' ],
    [ "cat\r",                           'needs_shell' ],
);

$t->plan(3 * @bypass + 12)->run();

sub strict { my ($call, $body, $loc) = @_;
    return agent($t, $call, $body, location => ($loc // '/strict/')) }

open(my $fh, '>', "$w/victim") or die; close $fh;
chmod 0666, "$w/victim";
open($fh, '>', "$w/python3") or die;
print $fh "#!/bin/sh\ntouch $w/M6\n"; close $fh;
chmod 0755, "$w/python3";

for my $b (@bypass) {
    my ($cmd, $code) = @$b;
    (my $name = $cmd) =~ s/([\x00-\x1f])/sprintf('\\x%02x', ord $1)/ge;
    my $r = strict('start', { command => $cmd, wait_ms => 0 });
    is($r->{_status}, 403, "refused: $name");
    if ($code) {
        is($r->{error}{code}, $code, "code $code: $name");
    } else {
        like($r->{error}{code} // '', qr/^(denied|not_allowed)$/,
            "refused by a rule: $name");
    }
    ok(length($r->{error}{message} // ''), "a JSON message: $name");
}

ok(-e "$w/victim", 'the file every spelling tried to remove is there');
my @made = glob("$w/M*");
is("@made", '', 'nothing that a refused command would make was made');

my $r = strict('start', { command => 'nosuch-program-here -x' },
    '/nosuch/');
is($r->{error}{code}, 'unknown_program', 'a program not in PATH: 403 '
    . 'unknown_program');

# allowed commands run, without a shell, with their words as quoted
$r = strict('start', { command => q{printf '%s|' 'a b' c "d\"e" f\ g '' 'h$i'},
    wait_for => 'h$i|' });
is($r->{_status}, 200, 'printf with quoted words: 200');
like($r->{output}, qr/a b\|c\|d"e\|f g\|\|h\$i\|/,
    'the program got its words exactly as quoted');

$r = strict('start', { command => 'python3 -q', wait_for => '>>> ' });
ok($r->{_status} == 200 && $r->{matched}, 'python3 -q runs');
my $py = $r->{id};
$r = strict('write', { id => $py, input => 'print(6*7)', submit => 1,
    wait_for => '>>> ' });
like($r->{output}, qr/42/, 'and answers');
strict('kill', { id => $py });

$r = strict('start', { command => 'cat', wait_ms => 0 });
is($r->{_status}, 200, 'cat runs');
$r = strict('write', { id => $r->{id}, input => 'hello', submit => 1,
    wait_for => "hello" });
ok($r->{matched} && $r->{output} =~ /^hello\nhello\n/,
    'and echoes (wait_for is matched by the output, not by the echo)');
strict('kill', { id => $r->{id} });

$r = strict('start', { command => 'top -b -n1', wait_for => 'PID' });
ok($r->{matched}, 'top -b -n1 runs');

# words too many for a spare's start message: the worker forks the
# keeper itself, with the words in its memory
my $long = 'y' x 70000;
$r = strict('start', { command => "python3 -c 'import sys; "
    . "print(\"len\", len(sys.argv[1]))' $long", wait_for => 'len 70000' });
ok($r->{matched}, 'a 70000-byte word reaches the program whole');

# the list shows the command as asked
$r = strict('list', {});
ok((grep { $_->{command} eq 'top -b -n1' } @{ $r->{sessions} }),
    'list shows the command line');
