#include "restore/tree_restore.h"
