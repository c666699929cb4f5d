# ngx_pty_module: build, run the demo, test, benchmark.
#
#   make            build build/ngx_pty_module.so against Debian's nginx-dev
#   make run        start the demo nginx on 127.0.0.1:$(PORT) in the foreground
#   make test       build, then run the whole test suite (prove -r t/)
#   make bench      run the benchmarks in t/bench (the last: make idle)
#   make idle       10,000 idle sessions: memory per session, all usable
#                   (IDLE_SESSIONS to change the number)
#   make load       500 sessions, 2,000 clients, every frame checked
#                   (the multi-worker load test, t/bench/load.pl)
#   make soak       200 sessions, 1,000 clients, output and input for 2
#                   minutes with a reload every 10 s: nothing lost, memory
#                   flat (t/bench/soak.pl; SOAK_* to change it)
#
# Other nginx versions: make NGINX_SRC=/path/to/nginx-x.y.z NGINX_BIN=/path/to/nginx
# (the module is then configured with --with-compat plus NGINX_CONFIGURE_FLAGS).

NGINX_SRC   ?= /usr/share/nginx/src
NGINX_BIN   ?= /usr/sbin/nginx
PORT        ?= 8080
BUILD       := build
TREE        := $(BUILD)/nginx-src
MODULE      := $(BUILD)/ngx_pty_module.so
CC          ?= cc
CC_OPT      ?= -g -O2 -fstack-protector-strong -Wformat -Werror=format-security \
               -fPIC -D_FORTIFY_SOURCE=2 -Wall -Wextra
LD_OPT      ?= -Wl,-z,relro -Wl,-z,now -fPIC

SRCS := ngx_pty_module.c $(wildcard src/*.c src/*.h) config
UNIT_BINS := $(BUILD)/escape_test $(BUILD)/text_test $(BUILD)/screen_test
TOOL_BINS := $(BUILD)/vtcompare $(BUILD)/screenbench
BENCH_BINS := $(BUILD)/rawpty $(BUILD)/wsbench $(BUILD)/wsload $(BUILD)/wsfanout \
              $(BUILD)/ptylat $(BUILD)/turns.so $(BUILD)/wssoak
TOOL_CFLAGS := -O2 -g -Wall -Wextra -Werror -Isrc

.PHONY: all deps run test unit bench idle load soak clean distclean

all: deps $(MODULE) $(UNIT_BINS) $(TOOL_BINS)

deps:
	@scripts/install-deps.sh

$(TREE)/objs/Makefile: config
	@scripts/configure-nginx.sh "$(NGINX_SRC)" "$(TREE)" "$(CURDIR)" \
	    "$(CC_OPT)" "$(LD_OPT)"

$(MODULE): $(TREE)/objs/Makefile $(SRCS)
	$(MAKE) -C $(TREE) -f objs/Makefile modules
	cp $(TREE)/objs/ngx_pty_module.so $@

$(BUILD)/%_test: t/unit/%_test.c src/ngx_pty_%.c src/ngx_pty_%.h
	@mkdir -p $(BUILD)
	$(CC) $(TOOL_CFLAGS) -o $@ $< src/ngx_pty_$*.c -lvterm

$(BUILD)/screen_test: t/unit/screen_test.c t/tools/vtref.c src/ngx_pty_screen.c src/ngx_pty_screen.h
	@mkdir -p $(BUILD)
	$(CC) $(TOOL_CFLAGS) -It/tools -o $@ t/unit/screen_test.c t/tools/vtref.c src/ngx_pty_screen.c -lvterm

$(BUILD)/vtcompare: t/tools/vtcompare.c t/tools/vtref.c src/ngx_pty_screen.c src/ngx_pty_screen.h
	@mkdir -p $(BUILD)
	$(CC) $(TOOL_CFLAGS) -It/tools -o $@ t/tools/vtcompare.c t/tools/vtref.c src/ngx_pty_screen.c -lvterm

$(BUILD)/screenbench: t/tools/screenbench.c t/tools/vtref.c src/ngx_pty_screen.c src/ngx_pty_screen.h
	@mkdir -p $(BUILD)
	$(CC) $(TOOL_CFLAGS) -It/tools -o $@ t/tools/screenbench.c t/tools/vtref.c src/ngx_pty_screen.c -lvterm

$(BUILD)/rawpty: t/bench/rawpty.c t/bench/bench.h
	$(CC) -O2 -Wall -Wextra -Werror -o $@ $< -lutil

$(BUILD)/ptylat: t/bench/ptylat.c t/bench/bench.h
	$(CC) -O2 -Wall -Wextra -Werror -o $@ $< -lutil

$(BUILD)/turns.so: t/bench/turns.c
	$(CC) -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -shared -fPIC -o $@ $< -ldl

$(BUILD)/wsbench: t/bench/wsbench.c t/bench/bench.h
	$(CC) -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -o $@ $<

$(BUILD)/wsload: t/bench/wsload.c t/bench/bench.h
	$(CC) -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -o $@ $<

$(BUILD)/wssoak: t/bench/wssoak.c t/bench/bench.h
	$(CC) -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -o $@ $<

$(BUILD)/wsfanout: t/bench/wsfanout.c t/bench/bench.h
	$(CC) -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -o $@ $<

run: all
	@scripts/install-deps.sh demo
	@scripts/run-demo.sh "$(NGINX_BIN)" "$(PORT)"

test: all
	prove -r t/

bench: all $(BENCH_BINS)
	perl t/bench/run.pl
	perl t/bench/fanout.pl
	perl t/bench/idle.pl

idle: all
	perl t/bench/idle.pl

load: all $(BUILD)/wsload
	perl t/bench/load.pl

soak: all $(BUILD)/wssoak
	perl t/bench/soak.pl

clean:
	rm -rf $(BUILD)/*.so $(UNIT_BINS) $(TOOL_BINS) $(BENCH_BINS) \
	    $(TREE)/objs/addon

distclean:
	rm -rf $(BUILD) demo
