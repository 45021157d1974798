// SPDX-License-Identifier: GPL-2.0-only
/*
 * What kvmstats needs of KVM and KVM does not export, read once at load
 * from the loaded kvm module's own symbol table:
 *
 *   kvm_vm_stats_header    kvm_vm_stats_desc      the VM stats file's fixed part
 *   kvm_vcpu_stats_header  kvm_vcpu_stats_desc    the vCPU stats file's
 *   kvm_vm_fops                                   what makes a file a VM file
 *
 * Reading the running KVM's own tables, rather than tables written for a
 * kernel series, is what lets one source tree serve every kernel with
 * binary stats byte for byte, including kernels whose KVM adds or reorders
 * statistics (a new release, a distribution backport): there is nothing to
 * go stale between the kernel kvmstats was written for and the one it runs
 * on.  desc.c then proves that the tables describe exactly the stat structs
 * of the headers kvmstats was built against, and refuses to load if not.
 *
 * The symbols are static or exported to nobody, so they are looked up the
 * way the kernel's own kallsyms does for modules: in the module's core
 * symbol table (struct mod_kallsyms), which Debian and the other
 * distributions keep for data objects too (CONFIG_KALLSYMS_ALL).  The kvm
 * module itself is found by name among the module kobjects (the kset that
 * holds our own module's kobject).  Everything read here belongs to kvm,
 * which cannot be unloaded while kvmstats is loaded: kvmstats uses its
 * exports, so the module loader counts kvmstats as a user of kvm.
 *
 * kvm_vm_fops stands in for file_is_kvm(), which newer kernels export only
 * to kvm-amd and kvm-intel: kvmstats_is_vm_file() makes exactly the test
 * file_is_kvm() makes, a comparison of the file's operations with KVM's VM
 * file operations.  No process can make a file with those operations but
 * through KVM_CREATE_VM, so an ordinary file, a memfd or another anon-inode
 * file named "kvm-vm" is never taken for one, and a file's private_data is
 * only read once the test has passed.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/elf.h>
#include <linux/kobject.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "kvmstats.h"

static const struct file_operations *kvmstats_kvm_vm_fops __ro_after_init;

bool kvmstats_is_vm_file(const struct file *file)
{
	return file && file->f_op == kvmstats_kvm_vm_fops;
}

/* The loaded kvm module, or NULL.  Pinned by our use of its exports. */
static struct module *kvmstats_find_kvm(void)
{
	struct kset *modules = THIS_MODULE->mkobj.kobj.kset;
	struct module_kobject *mk;
	struct kobject *kobj;
	struct module *mod;

	if (!modules)
		return NULL;
	kobj = kset_find_obj(modules, "kvm");
	if (!kobj)
		return NULL;
	/* Built-in code with parameters has a kobject too, without a module. */
	mk = container_of(kobj, struct module_kobject, kobj);
	mod = mk->mod;
	kobject_put(kobj);
	return mod;
}

/*
 * The address and size of the data object @name in @ks, which must be
 * defined exactly once.
 */
static int kvmstats_find_object(const struct mod_kallsyms *ks, const char *name,
				const void **addr, size_t *size)
{
	const struct elf64_sym *found = NULL;
	unsigned int i;

	for (i = 0; i < ks->num_symtab; i++) {
		const struct elf64_sym *sym = &ks->symtab[i];

		if (sym->st_shndx == SHN_UNDEF ||
		    strcmp(ks->strtab + sym->st_name, name))
			continue;
		if (found) {
			pr_err("kvm defines %s twice\n", name);
			return -EINVAL;
		}
		found = sym;
	}
	if (!found) {
		pr_err("kvm's symbol table has no %s\n", name);
		return -ENOENT;
	}
	if (ELF_ST_TYPE(found->st_info) != STT_OBJECT || !found->st_size ||
	    !found->st_value) {
		pr_err("kvm's %s is not a data object\n", name);
		return -EINVAL;
	}
	*addr = (const void *)(unsigned long)found->st_value;
	*size = found->st_size;
	return 0;
}

/* A data object of kvm's, found in its symbol table. */
struct kvmstats_kobj {
	const char *name;
	const void *addr;
	size_t size;
};

enum {
	KVMSTATS_VM_HEADER,
	KVMSTATS_VM_DESC,
	KVMSTATS_VCPU_HEADER,
	KVMSTATS_VCPU_DESC,
	KVMSTATS_VM_FOPS,
	KVMSTATS_NR_KOBJS,
};

/* Copy the header @h and the descriptors @d into @t. */
static int kvmstats_copy_table(const struct kvmstats_kobj *h,
			       const struct kvmstats_kobj *d,
			       struct kvmstats_ktable *t)
{
	if (h->size != sizeof(t->header)) {
		pr_err("kvm's %s is %zu bytes, not %zu\n", h->name, h->size,
		       sizeof(t->header));
		return -EINVAL;
	}
	memcpy(&t->header, h->addr, h->size);
	t->desc = kmemdup(d->addr, d->size, GFP_KERNEL);
	if (!t->desc)
		return -ENOMEM;
	t->desc_size = d->size;
	return 0;
}

static int kvmstats_read_kvm(struct module *kvm, struct kvmstats_ktable *vm,
			     struct kvmstats_ktable *vcpu)
{
	struct kvmstats_kobj o[KVMSTATS_NR_KOBJS] = {
		[KVMSTATS_VM_HEADER] = { .name = "kvm_vm_stats_header" },
		[KVMSTATS_VM_DESC] = { .name = "kvm_vm_stats_desc" },
		[KVMSTATS_VCPU_HEADER] = { .name = "kvm_vcpu_stats_header" },
		[KVMSTATS_VCPU_DESC] = { .name = "kvm_vcpu_stats_desc" },
		[KVMSTATS_VM_FOPS] = { .name = "kvm_vm_fops" },
	};
	const struct file_operations *fops;
	const struct mod_kallsyms *ks;
	int i, ret = 0;

	/*
	 * The symbol table of a live module does not change, but it is
	 * published under RCU (RCU-sched before 6.15): hold both while
	 * looking in it, and nothing more.  The objects themselves are kvm's
	 * and stay while kvm does: they are copied after, where allocating
	 * may sleep (GFP_ATOMIC would not make it legal here on PREEMPT_RT,
	 * whose slab locks sleep).
	 */
	rcu_read_lock();
	preempt_disable();
	ks = rcu_dereference_sched(kvm->kallsyms);
	for (i = 0; i < KVMSTATS_NR_KOBJS && !ret; i++)
		ret = kvmstats_find_object(ks, o[i].name, &o[i].addr,
					   &o[i].size);
	preempt_enable();
	rcu_read_unlock();
	if (ret)
		return ret;

	ret = kvmstats_copy_table(&o[KVMSTATS_VM_HEADER],
				  &o[KVMSTATS_VM_DESC], vm);
	if (!ret)
		ret = kvmstats_copy_table(&o[KVMSTATS_VCPU_HEADER],
					  &o[KVMSTATS_VCPU_DESC], vcpu);
	if (ret)
		return ret;

	/* File operations, whose llseek is the one KVM uses. */
	fops = o[KVMSTATS_VM_FOPS].addr;
	if (o[KVMSTATS_VM_FOPS].size != sizeof(*fops) ||
	    fops->llseek != noop_llseek) {
		pr_err("kvm's kvm_vm_fops is not the VM file operations\n");
		return -EINVAL;
	}
	kvmstats_kvm_vm_fops = fops;
	return 0;
}

int kvmstats_kvm_init(struct kvmstats_ktable *vm, struct kvmstats_ktable *vcpu)
{
	struct module *kvm = kvmstats_find_kvm();
	int ret;

	if (!kvm) {
		pr_err("the kvm module is not loaded\n");
		return -ENOENT;
	}
	ret = kvmstats_read_kvm(kvm, vm, vcpu);
	if (ret)
		kvmstats_kvm_exit(vm, vcpu);
	return ret;
}

void kvmstats_kvm_exit(struct kvmstats_ktable *vm, struct kvmstats_ktable *vcpu)
{
	kfree(vm->desc);
	kfree(vcpu->desc);
	vm->desc = NULL;
	vcpu->desc = NULL;
}
