# ngx_pty_module: build, run the demo, test, benchmark.
#
#   make            build build/ngx_pty_module.so against Debian's nginx-dev
#   make run        start the demo nginx on 127.0.0.1:$(PORT) in the foreground
#   make test       build, then run the whole test suite (prove -r t/)
#   make web        the client library's npm dependencies (src/web:
#                   xterm.js for the demo page, ws, typescript, playwright-core)
#   make deb        the Debian package libnginx-mod-http-pty_<version>_<arch>.deb
#                   in build/deb/ (dpkg-buildpackage, dh-sequence-nginx)
#   make bench      run the benchmarks in t/bench (the last: make idle)
#   make bench-archive  what pty_archive costs (t/bench/archive.pl)
#   make idle       10,000 idle sessions: memory per session, all usable
#                   (IDLE_SESSIONS to change the number)
#   make load       500 sessions, 2,000 clients, every frame checked
#                   (the multi-worker load test, t/bench/load.pl)
#   make soak       200 sessions, 1,000 clients, output and input for 2
#                   minutes with a reload every 10 s: nothing lost, memory
#                   flat (t/bench/soak.pl; SOAK_* to change it)
#   make test-asan  the module built with ASan and UBSan (build/asan/), the
#                   suite run against it (ASAN_TESTS to choose the tests)
#   make fuzz       the libFuzzer harnesses of t/fuzz, each run FUZZ_SECONDS
#                   (default 60); needs clang (docs/FUZZING.md)
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
TOOL_BINS := $(BUILD)/vtcompare $(BUILD)/screenbench $(BUILD)/vtpair
BENCH_BINS := $(BUILD)/rawpty $(BUILD)/wsbench $(BUILD)/wsload $(BUILD)/wsfanout \
              $(BUILD)/ptylat $(BUILD)/turns.so $(BUILD)/wssoak
TOOL_CFLAGS := -O2 -g -Wall -Wextra -Werror -Isrc
# what make builds; a second make with nothing changed leaves them alone
# (t/01-build-incremental.t)
BUILT := $(MODULE) $(UNIT_BINS) $(TOOL_BINS)
WEB := src/web
WEB_STAMP := $(WEB)/node_modules/.package-lock.json

.PHONY: all deps run test unit bench bench-archive idle load soak clean distclean \
        test-asan fuzz fuzz-build xterm web test-deps built deb

all: deps $(BUILT)

deps:
	@scripts/install-deps.sh

test-deps:
	@scripts/install-deps.sh test

built:
	@echo $(BUILT)

deb:
	@scripts/install-deps.sh deb
	@scripts/build-deb.sh

# npm ci: exactly the versions of package-lock.json
web: $(WEB_STAMP)

$(WEB_STAMP): $(WEB)/package.json $(WEB)/package-lock.json
	@scripts/install-deps.sh web
	cd $(WEB) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(TREE)/objs/Makefile: config
	@scripts/configure-nginx.sh "$(NGINX_SRC)" "$(TREE)" "$(CURDIR)" \
	    "$(CC_OPT)" "$(LD_OPT)"

# a new file renamed over the old one, never written into it: an nginx
# running the old module (a test, the demo) keeps its mapping, where a
# copy in place would change the code under its workers (SIGSEGV)
$(MODULE): $(TREE)/objs/Makefile $(SRCS)
	$(MAKE) -C $(TREE) -f objs/Makefile modules
	cp $(TREE)/objs/ngx_pty_module.so $@.new
	mv -f $@.new $@

$(BUILD)/%_test: t/unit/%_test.c src/ngx_pty_%.c src/ngx_pty_%.h
	@mkdir -p $(BUILD)
	$(CC) $(TOOL_CFLAGS) -o $@ $< src/ngx_pty_$*.c -lvterm

$(BUILD)/screen_test: t/unit/screen_test.c t/tools/vtref.c src/ngx_pty_screen.c src/ngx_pty_reflow.c src/ngx_pty_screen.h src/ngx_pty_grid.h src/ngx_pty_reflow.h
	@mkdir -p $(BUILD)
	$(CC) $(TOOL_CFLAGS) -It/tools -o $@ t/unit/screen_test.c t/tools/vtref.c src/ngx_pty_screen.c src/ngx_pty_reflow.c -lvterm

$(BUILD)/vtcompare: t/tools/vtcompare.c t/tools/vtref.c src/ngx_pty_screen.c src/ngx_pty_reflow.c src/ngx_pty_screen.h src/ngx_pty_grid.h src/ngx_pty_reflow.h
	@mkdir -p $(BUILD)
	$(CC) $(TOOL_CFLAGS) -It/tools -o $@ t/tools/vtcompare.c t/tools/vtref.c src/ngx_pty_screen.c src/ngx_pty_reflow.c -lvterm

$(BUILD)/screenbench: t/tools/screenbench.c t/tools/vtref.c src/ngx_pty_screen.c src/ngx_pty_reflow.c src/ngx_pty_screen.h src/ngx_pty_grid.h src/ngx_pty_reflow.h
	@mkdir -p $(BUILD)
	$(CC) $(TOOL_CFLAGS) -It/tools -o $@ t/tools/screenbench.c t/tools/vtref.c src/ngx_pty_screen.c src/ngx_pty_reflow.c -lvterm

$(BUILD)/vtpair: t/tools/vtpair.c src/ngx_pty_screen.c src/ngx_pty_reflow.c src/ngx_pty_screen.h src/ngx_pty_grid.h src/ngx_pty_reflow.h
	@mkdir -p $(BUILD)
	$(CC) $(TOOL_CFLAGS) -o $@ t/tools/vtpair.c src/ngx_pty_screen.c src/ngx_pty_reflow.c -lvterm

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

$(BUILD)/sqlfloor: t/bench/sqlfloor.c
	$(CC) -O2 -Wall -Wextra -Werror -o $@ $< -lsqlite3

$(BUILD)/wsfanout: t/bench/wsfanout.c t/bench/bench.h
	$(CC) -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -o $@ $<

run: all web
	@scripts/run-demo.sh "$(NGINX_BIN)" "$(PORT)"

# @xterm/headless for the differential Keyframe test (t/69-xterm-keyframes.t)
XTERM_MODULES := t/xterm/node_modules/.package-lock.json

$(XTERM_MODULES): t/xterm/package.json t/xterm/package-lock.json
	cd t/xterm && npm ci --no-audit --no-fund --loglevel=error

xterm: $(XTERM_MODULES)

test: all test-deps web $(XTERM_MODULES)
	prove -r t/

bench: all $(BENCH_BINS)
	perl t/bench/run.pl
	perl t/bench/fanout.pl
	perl t/bench/idle.pl

idle: all
	perl t/bench/idle.pl

bench-archive: all $(BUILD)/wsbench $(BUILD)/sqlfloor
	perl t/bench/archive.pl

load: all $(BUILD)/wsload
	perl t/bench/load.pl

soak: all $(BUILD)/wssoak
	perl t/bench/soak.pl

# ASan + UBSan: the module in its own tree, loaded into Debian's nginx with
# the runtime preloaded (t/lib/Test/Nginx.pm, TEST_NGINX_ASAN)
ASAN_TREE   := $(BUILD)/asan/nginx-src
ASAN_MODULE := $(BUILD)/asan/ngx_pty_module.so
# (-O1's flow analysis sees uninitialized use where -O2's does not)
ASAN_CC_OPT := -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
               -fPIC -Wall -Wextra -Wno-maybe-uninitialized
ASAN_LD_OPT := -fsanitize=address,undefined -Wl,-z,relro -Wl,-z,now -fPIC
# 72 instrumented workers on a small machine starve the keeper forker
# past its deadline (an alert): that test runs in make test only, as do
# the build check and the Debian package (neither uses the ASan module),
# and the browser, client library and xterm.js tests, whose time goes to
# node and chromium (the module paths they use run in other tests too)
ASAN_TESTS  ?= $(filter-out t/61-workers-many.t t/01-build-incremental.t \
                 t/77-deb.t t/75-web-client.t t/76-browser.t \
                 t/69-xterm-keyframes.t,$(wildcard t/*.t))

$(ASAN_TREE)/objs/Makefile: config
	@scripts/configure-nginx.sh "$(NGINX_SRC)" "$(ASAN_TREE)" "$(CURDIR)" \
	    "$(ASAN_CC_OPT)" "$(ASAN_LD_OPT)"

$(ASAN_MODULE): $(ASAN_TREE)/objs/Makefile $(SRCS)
	$(MAKE) -C $(ASAN_TREE) -f objs/Makefile modules
	cp $(ASAN_TREE)/objs/ngx_pty_module.so $@.new
	mv -f $@.new $@

test-asan: all test-deps web $(ASAN_MODULE) $(XTERM_MODULES)
	TEST_NGINX_MODULE=$(CURDIR)/$(ASAN_MODULE) \
	TEST_NGINX_ASAN=$$($(CC) -print-file-name=libasan.so) \
	    prove $(ASAN_TESTS)

# libFuzzer: harnesses in t/fuzz, seeds in t/fuzz/corpus/<name>; the
# corpus a run grows stays in build/fuzz/corpus/<name>
FUZZ_SECONDS ?= 60
FUZZ_DIR    := $(BUILD)/fuzz
FUZZ_TREE   := $(FUZZ_DIR)/nginx-src
FUZZ_CFLAGS := -g -O1 -fno-omit-frame-pointer \
               -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
               -Wall -Wextra -Werror -Isrc -It/fuzz -It/tools
FUZZ_NGX_CC := -g -O1 -fno-omit-frame-pointer \
               -fsanitize=fuzzer-no-link,address,undefined \
               -fno-sanitize-recover=all -DNGX_PTY_FUZZ=1 -Wno-error
FUZZ_PURE   := escape text screen
FUZZ_NGX    := ws binding api redact
FUZZ_BINS   := $(addprefix $(FUZZ_DIR)/fuzz_,$(FUZZ_PURE) $(FUZZ_NGX))
comma       := ,
# the stand-ins each harness gives (t/fuzz/fuzz_env.h and the harness)
FUZZ_WRAP   := -Wl,--wrap=ngx_http_finalize_request \
               -Wl,--wrap=ngx_handle_write_event \
               -Wl,--wrap=ngx_handle_read_event \
               -Wl,--wrap=ngx_http_output_filter
FUZZ_WRAP_SESSION := $(addprefix -Wl$(comma)--wrap=ngx_pty_session_,input \
               resize request_keyframe notify kill unlisten)
FUZZ_WRAP_binding := $(FUZZ_WRAP_SESSION)
FUZZ_WRAP_api := $(addprefix -Wl$(comma)--wrap=ngx_pty_session_,input kill \
               get put listen unlisten start screen_apply settle) \
               -Wl,--wrap=ngx_pty_sessions_stat -Wl,--wrap=ngx_http_send_header
FUZZ_INCS   := $(addprefix -I$(FUZZ_TREE)/,src/core src/event \
               src/event/modules src/os/unix objs src/http src/http/modules)

$(FUZZ_TREE)/objs/nginx: config $(SRCS)
	@scripts/install-deps.sh fuzz
	@scripts/fuzz-nginx.sh "$(FUZZ_DIR)" "$(CURDIR)" "$(FUZZ_NGX_CC)"

# nginx and the module as a library: main renamed, the harness's own copy
# of a module file wins over the archive's
$(FUZZ_DIR)/libngx.a: $(FUZZ_TREE)/objs/nginx
	rm -f $@ $(FUZZ_DIR)/nginx.o
	objcopy --redefine-sym main=ngx_fuzz_nginx_main \
	    $(FUZZ_TREE)/objs/src/core/nginx.o $(FUZZ_DIR)/nginx.o
	ar rcs $@ $(FUZZ_DIR)/nginx.o $(FUZZ_TREE)/objs/ngx_modules.o \
	    $$(find $(FUZZ_TREE)/objs -name '*.o' ! -name nginx.o \
	        ! -name ngx_modules.o | sort)

$(FUZZ_DIR)/fuzz_escape: t/fuzz/fuzz_escape.c t/fuzz/fuzz.h src/ngx_pty_escape.c
	@scripts/install-deps.sh fuzz
	@mkdir -p $(FUZZ_DIR)
	clang $(FUZZ_CFLAGS) -o $@ t/fuzz/fuzz_escape.c src/ngx_pty_escape.c

$(FUZZ_DIR)/fuzz_text: t/fuzz/fuzz_text.c t/fuzz/fuzz.h src/ngx_pty_text.c
	@scripts/install-deps.sh fuzz
	@mkdir -p $(FUZZ_DIR)
	clang $(FUZZ_CFLAGS) -o $@ t/fuzz/fuzz_text.c src/ngx_pty_text.c

$(FUZZ_DIR)/fuzz_screen: t/fuzz/fuzz_screen.c t/fuzz/fuzz.h t/tools/vtref.c \
    src/ngx_pty_screen.c src/ngx_pty_reflow.c src/ngx_pty_grid.h
	@scripts/install-deps.sh fuzz
	@mkdir -p $(FUZZ_DIR)
	clang $(FUZZ_CFLAGS) -o $@ t/fuzz/fuzz_screen.c t/tools/vtref.c \
	    src/ngx_pty_screen.c src/ngx_pty_reflow.c -lvterm

$(FUZZ_DIR)/fuzz_%: t/fuzz/fuzz_%.c t/fuzz/fuzz.h t/fuzz/fuzz_env.h \
    $(FUZZ_DIR)/libngx.a
	clang $(FUZZ_CFLAGS) -Wno-unused-parameter -DNGX_PTY_FUZZ=1 $(FUZZ_INCS) \
	    -o $@ $< \
	    $(FUZZ_WRAP) $(FUZZ_WRAP_$*) $(FUZZ_DIR)/libngx.a \
	    -lvterm -ljansson -lsqlite3 -lutil -lpcre2-8 -lcrypt -lcrypto

fuzz-build: $(FUZZ_BINS)

# every harness runs, whatever one before it found; failed ones are named
# at the end (and make fails)
fuzz: fuzz-build
	@failed=; for f in $(FUZZ_PURE) $(FUZZ_NGX); do \
	    mkdir -p $(FUZZ_DIR)/corpus/$$f $(FUZZ_DIR)/crashes/$$f; \
	    echo "fuzz_$$f: $(FUZZ_SECONDS) s"; \
	    if $(FUZZ_DIR)/fuzz_$$f -max_total_time=$(FUZZ_SECONDS) \
	        -print_final_stats=1 $$(cat t/fuzz/fuzz_$$f.options 2>/dev/null) \
	        -artifact_prefix=$(FUZZ_DIR)/crashes/$$f/ \
	        $(FUZZ_DIR)/corpus/$$f t/fuzz/corpus/$$f \
	        > $(FUZZ_DIR)/fuzz_$$f.log 2>&1; \
	    then \
	        grep -E '^stat::(number_of_executed_units|peak_rss)|^#[0-9]+.*DONE' \
	            $(FUZZ_DIR)/fuzz_$$f.log; \
	    else \
	        tail -40 $(FUZZ_DIR)/fuzz_$$f.log; failed="$$failed fuzz_$$f"; \
	    fi; \
	done; \
	if [ -n "$$failed" ]; then echo "failed:$$failed"; exit 1; fi

clean:
	rm -rf $(BUILD)/*.so $(UNIT_BINS) $(TOOL_BINS) $(BENCH_BINS) \
	    $(TREE)/objs/addon $(ASAN_MODULE) $(FUZZ_BINS)

distclean:
	rm -rf $(BUILD) demo $(WEB)/node_modules $(WEB)/types
