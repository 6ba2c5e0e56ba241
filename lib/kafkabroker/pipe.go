package kafkabroker

import (
	"context"
	"net"
	"sync"
	"time"
)

// In-process connections. The embedded broker listens on TCP (other processes, kcat) and
// takes pipes (net.Pipe) from clients in its own process: the same Kafka protocol bytes,
// without the loopback's system calls. Every produce and fetch over loopback TCP cost
// about six (a write and two reads a side), 4% of `svc dev`'s CPU at 200k events/s.
// Clients get there through Dial (kgo.Dialer), which the service's clients use
// (ClientOpts).

// inProcess maps the listen address of each embedded broker of this process (its
// Addr().String(), the address its metadata advertises) to its listener.
var inProcess sync.Map // string → *pipeListener

// pipeListener is an embedded broker's listener: connections accepted on its TCP
// listener, and pipes from Dial.
type pipeListener struct {
	net.Listener // TCP
	conns        chan net.Conn
	done         chan struct{}
	once         sync.Once
}

// listenInProcess listens on TCP at addr and registers the listener for Dial.
func listenInProcess(network, addr string) (net.Listener, error) {
	tcp, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	l := &pipeListener{Listener: tcp, conns: make(chan net.Conn), done: make(chan struct{})}
	go l.acceptTCP()
	inProcess.Store(tcp.Addr().String(), l)
	return l, nil
}

// acceptTCP hands the TCP listener's connections to Accept until the listener closes.
func (l *pipeListener) acceptTCP() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			l.Close()
			return
		}
		select {
		case l.conns <- c:
		case <-l.done:
			c.Close()
			return
		}
	}
}

// Accept returns the next connection, TCP or pipe.
func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops both: Dial no longer finds the listener.
func (l *pipeListener) Close() error {
	l.once.Do(func() {
		inProcess.CompareAndDelete(l.Addr().String(), l)
		close(l.done)
	})
	return l.Listener.Close()
}

// dial returns the client end of a new pipe whose other end Accept returns.
func (l *pipeListener) dial(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
	case <-ctx.Done():
	}
	client.Close()
	server.Close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, net.ErrClosed
}

// dialTimeout is kgo's default dial timeout, which a kgo.Dialer replaces.
const dialTimeout = 10 * time.Second

// Dial connects to a Kafka broker at host: a pipe to an embedded broker of this process
// listening there, else TCP. It is the kgo.Dialer of the service's clients.
func Dial(ctx context.Context, network, host string) (net.Conn, error) {
	if l, ok := inProcess.Load(host); ok {
		return l.(*pipeListener).dial(ctx)
	}
	d := net.Dialer{Timeout: dialTimeout}
	return d.DialContext(ctx, network, host)
}
