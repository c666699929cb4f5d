package Test::Nginx::PtyA2A;

# Test::Nginx::PtyA2A - A2A task operations over pty-ws/v1 for the tests:
#
#   my $r = send_message($ws, '2**64', submit => 1, wait_for => '>>> ');
#   my ($accepted, @updates) = stream_message($ws, 'print(1)', submit => 1);
#   my $text = task_output($r->{payload}{task});

use strict;
use warnings;

use Exporter qw(import);
use Test::Nginx::PtyWS qw(uuid_v7);

our @EXPORT = qw(a2a_message send_message stream_message task_output
    task_state is_terminal until_terminal);

# an A2A Message: the text is the input, %meta its metadata
sub a2a_message {
    my ($text, %meta) = @_;
    $meta{submit} = $meta{submit} ? \1 : \0 if exists $meta{submit};
    return { kind => 'message', role => 'user', messageId => uuid_v7(),
        parts => [ { kind => 'text', text => $text } ],
        (%meta ? (metadata => \%meta) : ()) };
}

# SendMessage; returns its answer (SendMessage.Response or Error)
sub send_message {
    my ($ws, $text, %meta) = @_;
    my $timeout = delete $meta{timeout} // 20;
    my $id = $ws->send_op('SendMessage', { message => a2a_message($text,
        %meta) });
    return $ws->recv_match(sub { ($_[0]{id} // '') eq $id
        && $_[0]{op} =~ /^(SendMessage\.Response|Error)$/ }, $timeout,
        'SendMessage answer');
}

sub task_state { return $_[0]{status}{state} // '' }

sub is_terminal {
    return task_state($_[0]) =~ /^(completed|failed|canceled|input-required)$/;
}

# the updates of task $tid up to its terminal one
sub until_terminal {
    my ($ws, $tid, $timeout) = @_;
    return grep { $_->{op} eq 'TaskStatusUpdate' } $ws->recv_until(sub {
        $_[0]{op} eq 'TaskStatusUpdate'
            && $_[0]{payload}{task}{id} eq $tid
            && is_terminal($_[0]{payload}{task}) }, $timeout // 20,
        "terminal update of $tid");
}

# SendStreamingMessage; returns Accepted (or Error) and the updates
sub stream_message {
    my ($ws, $text, %meta) = @_;
    my $timeout = delete $meta{timeout} // 20;
    my $id = $ws->send_op('SendStreamingMessage',
        { message => a2a_message($text, %meta) });
    my $acc = $ws->recv_match(sub { ($_[0]{id} // '') eq $id }, 10,
        'SendStreamingMessage answer');
    return ($acc) unless ($acc->{op} // '') eq
        'SendStreamingMessage.Accepted';
    return ($acc, until_terminal($ws, $acc->{payload}{task_id}, $timeout));
}

# the text of a task's artifacts
sub task_output {
    my ($task) = @_;
    return join '', map { $_->{text} // '' }
        map { @{$_->{parts} // []} } @{$task->{artifacts} // []};
}

1;
