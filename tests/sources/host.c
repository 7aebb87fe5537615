/* Plain host (x86-64) C code: ELF objects that are not device binaries.
   devbin must recognise them as host ELF (EM_X86_64 / EM_386) and not mistake
   them for cubins or AMDGPU code objects; see README.md. */

int host_counter = 7;
static const char host_banner[] = "devbin host fixture";

static int square(int x) { return x * x; }

int host_sum_squares(const int *v, int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += square(v[i]);
    host_counter++;
    return s;
}

const char *host_name(void) { return host_banner; }

extern int host_external(int);  /* left undefined: an undefined symbol with relocations */

int host_call_external(int x) { return host_external(x) + 1; }
