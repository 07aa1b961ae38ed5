#include "sim/common/build_id.hpp"

#include <elf.h>
#include <link.h>

#include <cstdio>
#include <cstring>

namespace eldr {

namespace {

// dl_iterate_phdr visits the main program first; its PT_NOTE segments hold the build-ID note.
int find_build_id(dl_phdr_info* info, size_t, void* out)
{
  auto* id = static_cast<std::string*>(out);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE)
      continue;
    const char* p   = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) n;
      std::memcpy(&n, p, sizeof n);
      const char* name = p + sizeof n;
      const char* desc = name + ((n.n_namesz + 3) & ~3u);
      const char* next = desc + ((n.n_descsz + 3) & ~3u);
      if (next > end)
        break;
      if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        for (unsigned k = 0; k < n.n_descsz; ++k) {
          char hex[3];
          std::snprintf(hex, sizeof hex, "%02x", unsigned(static_cast<unsigned char>(desc[k])));
          *id += hex;
        }
        return 1;
      }
      p = next;
    }
  }
  return 1;  // only the main program
}

}  // namespace

const std::string& executable_build_id()
{
  static const std::string id = [] {
    std::string s;
    dl_iterate_phdr(find_build_id, &s);
    return s;
  }();
  return id;
}

const char* eldrsim_version()
{
  return ELDR_VERSION;
}

}  // namespace eldr
