#include "tree/fs_meta.h"
