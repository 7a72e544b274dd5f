// stb_image_write's implementation for the page (the desktop links Debian's
// libstb, which holds it). Third-party code: built without our warnings.
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
